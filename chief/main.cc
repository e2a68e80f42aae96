// The `chief` binary: owns a pstrain run.
//
//   export TF_CONFIG='{"cluster": {...}, "task": {"type": "chief", "index":
//   0}}' chief --model=cnn --optimizer=adam --epochs=2 --model_dir=/tmp/run
//
// Waits for every ps and worker of TF_CONFIG, creates the variables (and
// restores the newest good checkpoint of --model_dir, keeping its run id and
// step), lets the workers train, evaluates on the test set each epoch, writes
// checkpoints (model_dir/ckpt-<step>/, every --checkpoint_every_steps steps or
// --checkpoint_every_secs seconds, and at the end), writes
// model_dir/summary.json and tells every task the run is over. Exits 0 when
// the run succeeded, 1 when it failed, 2 on a bad flag or TF_CONFIG.
//
//   chief --export_safetensors=/tmp/model.safetensors --model_dir=/tmp/run
//
// writes the variables of the newest good checkpoint of --model_dir as a
// safetensors file instead (no TF_CONFIG needed). With a TF_CONFIG task of
// type "evaluator" (listed in the chief's TF_CONFIG too), it runs the
// evaluator task (chief/evaluator_task.h) with the chief's --model_dir.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chief/checkpoint_reader.h"
#include "chief/checkpointer.h"
#include "chief/chief_metrics.h"
#include "chief/chief_service.h"
#include "chief/driver.h"
#include "chief/embedding_settings.h"
#include "chief/evaluator_task.h"
#include "chief/run_setup.h"
#include "chief/run_state.h"
#include "chief/safetensors.h"
#include "collective/replica_checkpoint.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/file_lock.h"
#include "common/flag_range.h"
#include "common/grpc_options.h"
#include "common/grpc_security.h"
#include "common/metrics.h"
#include "common/metrics_server.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "common/task_security.h"
#include "common/tf_config.h"
#include "common/update_config.h"
#include "compute/loss_config.h"
#include "grpcpp/grpcpp.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"
#include "ps/ps_client.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG JSON, or @path to a file holding it; default: the "
          "TF_CONFIG environment variable");
ABSL_FLAG(std::string, model, "cnn",
          "The model to train: cnn, mlp (built in), or the path of a Keras "
          "model's JSON (model.to_json())");
ABSL_FLAG(std::string, optimizer, "adam",
          "The update rule the ps tasks apply: sgd, momentum, adagrad or adam");
ABSL_FLAG(double, learning_rate, 0,
          "The optimizer's learning rate, > 0; 0 picks Keras's default for "
          "--optimizer (0.01 for sgd and momentum, 0.001 for adagrad and "
          "adam)");
ABSL_FLAG(double, momentum, 0.9,
          "--optimizer=momentum: how much of the previous update each update "
          "keeps, in [0, 1)");
ABSL_FLAG(bool, nesterov, false,
          "--optimizer=momentum: apply Nesterov's momentum instead of the "
          "classical one");
ABSL_FLAG(double, beta_1, 0.9,
          "--optimizer=adam: decay of the gradient's running mean, in [0, 1)");
ABSL_FLAG(double, beta_2, 0.999,
          "--optimizer=adam: decay of the squared gradient's running mean, in "
          "[0, 1)");
ABSL_FLAG(double, epsilon, 1e-7,
          "--optimizer=adam or adagrad: the constant added to the "
          "denominator for numerical stability, >= 0");
ABSL_FLAG(double, initial_accumulator_value, 0.1,
          "--optimizer=adagrad: the starting value of every squared-gradient "
          "accumulator, >= 0");
ABSL_FLAG(std::string, embedding_optimizer, "",
          "The update rule of embedding tables' rows: sgd, momentum, adagrad "
          "(TensorFlow's: w -= lr g / (sqrt(a) + epsilon)), adam, ftrl "
          "(TensorFlow's Ftrl) or lazy_adam (Adam stepping each row only "
          "when it is updated); empty: --optimizer");
ABSL_FLAG(double, embedding_learning_rate, 0,
          "--embedding_optimizer's learning rate, > 0; 0: the dense one");
ABSL_FLAG(double, embedding_initial_accumulator_value, 0.1,
          "--embedding_optimizer=adagrad or ftrl: starting accumulator, >= 0");
ABSL_FLAG(double, embedding_epsilon, 1e-7,
          "--embedding_optimizer=adagrad, adam or lazy_adam: epsilon, >= 0");
ABSL_FLAG(double, embedding_beta_1, 0.9,
          "--embedding_optimizer=adam or lazy_adam: beta_1, in [0, 1)");
ABSL_FLAG(double, embedding_beta_2, 0.999,
          "--embedding_optimizer=adam or lazy_adam: beta_2, in [0, 1)");
ABSL_FLAG(double, ftrl_learning_rate_power, -0.5,
          "--embedding_optimizer=ftrl: learning_rate_power, <= 0");
ABSL_FLAG(double, ftrl_l1_regularization_strength, 0,
          "--embedding_optimizer=ftrl: L1 strength, >= 0");
ABSL_FLAG(double, ftrl_l2_regularization_strength, 0,
          "--embedding_optimizer=ftrl: online L2 strength, >= 0");
ABSL_FLAG(double, ftrl_l2_shrinkage_regularization_strength, 0,
          "--embedding_optimizer=ftrl: shrinkage-type L2 strength, >= 0");
ABSL_FLAG(double, ftrl_beta, 0,
          "--embedding_optimizer=ftrl: Keras's beta (adds beta / (2 lr) to "
          "the L2 strength), >= 0");
ABSL_FLAG(int64_t, embedding_min_count, 1,
          "Growing embedding tables: a row is created once its id was in "
          "this many applied updates (pulls do not count); until then it "
          "reads as zeros and its gradients are dropped; >= 1");
ABSL_FLAG(int64_t, embedding_ttl_steps, 0,
          "Growing embedding tables: rows not updated for this many steps "
          "(versions of the ps's piece) are removed; 0: never");
ABSL_FLAG(int64_t, embedding_max_rows, 0,
          "Growing embedding tables: the most rows of a table on one ps; the "
          "least frequently updated are evicted beyond it; 0: no limit");
ABSL_FLAG(double, weight_decay, 0,
          "L2 weight decay the ps tasks add to every gradient (g += "
          "weight_decay * w), >= 0");
ABSL_FLAG(std::string, loss, "",
          "sparse_categorical_crossentropy, categorical_crossentropy, "
          "binary_crossentropy, mse, mae or huber (Keras's, against each "
          "example's integer label); default: from the model's output layer "
          "(a softmax: sparse_categorical_crossentropy; one sigmoid unit: "
          "binary_crossentropy; --model=cnn: "
          "sparse_categorical_crossentropy from logits), else refused");
ABSL_FLAG(bool, from_logits, false,
          "Keras's from_logits for the cross-entropies: the model's output is "
          "the logits (false: probabilities, clipped as Keras does); a final "
          "softmax or sigmoid is read behind either way, as tf.keras does");
ABSL_FLAG(std::string, strategy, "auto",
          "parameter_server (TF_CONFIG lists ps tasks), multi_worker_mirrored "
          "(only chief and worker tasks: the workers hold the model and "
          "all-reduce their gradients) or auto (what TF_CONFIG's cluster "
          "is)");
ABSL_FLAG(std::string, allreduce_dtype, "float32",
          "Collective runs (TF_CONFIG without \"ps\"): what the workers' "
          "all-reduce sends, float32 or bf16 (half the bytes, every sum "
          "rounded to bfloat16); handed to every worker with the run");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, or bf16: the workers' Conv2D and Dense layers multiply in "
          "bf16 and accumulate in float32 (CPUs with AVX-512 BF16 or AMX); "
          "weights, gradients and the loss stay float32");
ABSL_FLAG(std::string, mesh, "",
          "Tensor parallelism: data:D,model:M (D x M workers; a group's M "
          "workers split the variables, reading one batch); data:N,model:1");
ABSL_FLAG(std::string, layout_map, "",
          "JSON file from variable-path regular expressions to a layout per "
          "dimension, as Keras's LayoutMap: {\"d1/kernel\": [null, "
          "\"model\"]}; unmatched variables are replicated");
ABSL_FLAG(std::string, mode, "sync",
          "sync (each step applies one gradient from every worker, or from "
          "--replicas_to_aggregate of them) or async (each gradient is "
          "applied as it arrives)");
ABSL_FLAG(int, replicas_to_aggregate, 0,
          "sync: gradients applied per step, in [0, the number of workers] "
          "(0: one from every worker); fewer than the workers makes the "
          "slowest ones backup workers");
ABSL_FLAG(int, max_staleness, -1,
          "async: refuse gradients computed on variables this many versions "
          "old or older (>= 0; -1: no bound)");
ABSL_FLAG(int, epochs, 1,
          "Passes over the training data (>= 1; ignored when --steps is set)");
ABSL_FLAG(int64_t, steps, 0,
          "Global steps to train (>= 0; 0: train --epochs epochs)");
ABSL_FLAG(int, batch_size, 64, "Examples each worker computes per step, >= 1");
ABSL_FLAG(uint64_t, seed, 42,
          "The run's seed, from which initial values, data order and dropout "
          "are drawn");
ABSL_FLAG(std::string, model_dir, "/tmp/pstrain",
          "The run's directory: checkpoints and summary.json are written "
          "there, and a chief started again resumes from its newest "
          "checkpoint");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "The data: train.csv and test.csv (numeric or id features, then an "
          "integer label; data/data_dir.h), else Fashion-MNIST IDX "
          "files ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)");
ABSL_FLAG(std::string, data_format, "",
          "How --data_dir is read: empty (train.csv/test.csv, else "
          "Fashion-MNIST IDX files) or criteo (train*.tsv[.gz] and "
          "test*.tsv[.gz], or --train_files and --test_files, in the Criteo "
          "format, streamed; the model's inputs are named dense/sparse or "
          "I1..I13/C1..C26)");
ABSL_FLAG(std::string, train_files, "",
          "--data_format=criteo: the training files' names in --data_dir, "
          "comma-separated glob patterns (empty: train*.tsv,train*.tsv.gz); "
          "e.g. 'day_?.gz,day_1?.gz,day_2[0-2].gz' for the Terabyte set's "
          "days 0 to 22. Read in natural order (day_2 before day_10)");
ABSL_FLAG(std::string, test_files, "",
          "--data_format=criteo: the test files' names in --data_dir, as "
          "--train_files (empty: test*.tsv,test*.tsv.gz); e.g. day_23.gz");
ABSL_FLAG(std::string, bad_lines, "refuse",
          "--data_format=criteo: a malformed line fails the run (refuse) or "
          "is skipped and counted (skip)");
ABSL_FLAG(std::string, dynamic_embeddings, "",
          "Comma-separated Embedding layers whose tables grow on first touch, "
          "keyed by 64-bit id, instead of having input_dim rows (an Embedding "
          "with input_dim 0 grows too)");
ABSL_FLAG(int64_t, print_every_steps, 100,
          "Log a progress line every this many steps, >= 1");
ABSL_FLAG(int, wait_for_tasks_seconds, 300,
          "How long to wait for every ps and worker to register, >= 1");
ABSL_FLAG(int, step_timeout_seconds,
          absl::ToInt64Seconds(pstrain::kDefaultStepTimeout),
          "sync: a step still missing a gradient after this long fails, "
          "in [1, 1000000]");
ABSL_FLAG(int, threads, 0,
          "Threads evaluating the model on the test set (0 to 1024; 0: one "
          "per core)");
ABSL_FLAG(int, port, 0,
          "Listen on this port instead of TF_CONFIG's, in [0, 65535] (0: "
          "TF_CONFIG's)");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics at http://<host>:<port>/metrics, where "
          "<host> is this task's TF_CONFIG host (0: off)");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "Write a checkpoint every this many steps (0: off); one is always "
          "written at the end");
ABSL_FLAG(int64_t, checkpoint_every_secs, 0,
          "Write a checkpoint every this many seconds (0: off)");
ABSL_FLAG(int, keep_checkpoints, 5, "Complete checkpoints kept (>= 1)");
ABSL_FLAG(std::string, on_worker_failure, "wait",
          "sync: what a dead worker's peers do: wait (for it to be started "
          "again) or continue (without it, one of them training its share "
          "until it comes back; at start, a worker missing --failure_timeout "
          "after the other tasks are here counts as dead)");
ABSL_FLAG(absl::Duration, failure_timeout, absl::Seconds(10),
          "A ps or worker silent this long is presumed dead (a dead ps task "
          "is waited for and the run restored from the newest checkpoint)");
ABSL_FLAG(std::string, export_safetensors, "",
          "Write the variables of --model_dir's newest good checkpoint to "
          "this safetensors file and exit (no training)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate the chief presents, signed by --tls_ca: with "
          "--tls_key and --tls_ca, the chief serves only mutual-TLS calls "
          "(the ps tasks', the workers') and calls the ps tasks over TLS, "
          "which know it as the chief by TF_CONFIG's chief host in it");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM certificate of the cluster CA: the chief serves only tasks "
          "whose certificate this CA signed, and trusts only ps tasks it "
          "signed");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the cluster's shared token (a trailing newline is "
          "dropped): the chief serves only calls carrying it (gRPC's health "
          "service excepted); its own calls carry --chief_token_file's, an "
          "evaluator task's this one");
ABSL_FLAG(std::string, chief_token_file, "",
          "File holding the chief's own token, distinct from "
          "--auth_token_file's and given to the ps tasks alone: the chief "
          "sends it instead of the cluster's, and ps tasks accept their "
          "chief-only calls (CreateVariables, Save, Restore, SetWorkers) "
          "only with it");

namespace pstrain {
namespace {

// The --embedding_* and --ftrl_* flags (and --momentum, --nesterov).
chief::EmbeddingSettings EmbeddingSettingsFromFlags() {
  chief::EmbeddingSettings s;
  s.optimizer = absl::GetFlag(FLAGS_embedding_optimizer);
  s.learning_rate = absl::GetFlag(FLAGS_embedding_learning_rate);
  s.initial_accumulator_value =
      absl::GetFlag(FLAGS_embedding_initial_accumulator_value);
  s.epsilon = absl::GetFlag(FLAGS_embedding_epsilon);
  s.beta_1 = absl::GetFlag(FLAGS_embedding_beta_1);
  s.beta_2 = absl::GetFlag(FLAGS_embedding_beta_2);
  s.momentum = absl::GetFlag(FLAGS_momentum);
  s.nesterov = absl::GetFlag(FLAGS_nesterov);
  s.ftrl_learning_rate_power = absl::GetFlag(FLAGS_ftrl_learning_rate_power);
  s.ftrl_l1 = absl::GetFlag(FLAGS_ftrl_l1_regularization_strength);
  s.ftrl_l2 = absl::GetFlag(FLAGS_ftrl_l2_regularization_strength);
  s.ftrl_l2_shrinkage =
      absl::GetFlag(FLAGS_ftrl_l2_shrinkage_regularization_strength);
  s.ftrl_beta = absl::GetFlag(FLAGS_ftrl_beta);
  s.min_count = absl::GetFlag(FLAGS_embedding_min_count);
  s.ttl_steps = absl::GetFlag(FLAGS_embedding_ttl_steps);
  s.max_rows = absl::GetFlag(FLAGS_embedding_max_rows);
  return s;
}

// The flags that shape the run (chief/run_setup.h).
chief::RunSettings RunSettingsFromFlags() {
  chief::RunSettings s;
  s.model = absl::GetFlag(FLAGS_model);
  s.seed = absl::GetFlag(FLAGS_seed);
  chief::OptimizerSettings& o = s.optimizer;
  o.name = absl::GetFlag(FLAGS_optimizer);
  o.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.nesterov = absl::GetFlag(FLAGS_nesterov);
  o.beta_1 = absl::GetFlag(FLAGS_beta_1);
  o.beta_2 = absl::GetFlag(FLAGS_beta_2);
  o.epsilon = absl::GetFlag(FLAGS_epsilon);
  o.initial_accumulator_value = absl::GetFlag(FLAGS_initial_accumulator_value);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  s.embedding = EmbeddingSettingsFromFlags();
  s.dynamic_embeddings = absl::GetFlag(FLAGS_dynamic_embeddings);
  s.loss = absl::GetFlag(FLAGS_loss);
  s.from_logits = absl::GetFlag(FLAGS_from_logits);
  s.strategy = absl::GetFlag(FLAGS_strategy);
  s.allreduce_dtype = absl::GetFlag(FLAGS_allreduce_dtype);
  s.precision = absl::GetFlag(FLAGS_precision);
  s.mesh = absl::GetFlag(FLAGS_mesh);
  s.layout_map = absl::GetFlag(FLAGS_layout_map);
  s.mode = absl::GetFlag(FLAGS_mode);
  s.replicas_to_aggregate = absl::GetFlag(FLAGS_replicas_to_aggregate);
  s.max_staleness = absl::GetFlag(FLAGS_max_staleness);
  s.step_timeout_seconds = absl::GetFlag(FLAGS_step_timeout_seconds);
  s.batch_size = absl::GetFlag(FLAGS_batch_size);
  s.epochs = absl::GetFlag(FLAGS_epochs);
  s.steps = absl::GetFlag(FLAGS_steps);
  s.data_dir = absl::GetFlag(FLAGS_data_dir);
  s.data_format = absl::GetFlag(FLAGS_data_format);
  s.bad_lines = absl::GetFlag(FLAGS_bad_lines);
  for (const auto& [flag, patterns] :
       {std::make_pair(&FLAGS_train_files, &s.train_files),
        std::make_pair(&FLAGS_test_files, &s.test_files)}) {
    const std::string value = absl::GetFlag(*flag);
    if (!value.empty()) *patterns = absl::StrSplit(value, ',');
  }
  s.on_worker_failure = absl::GetFlag(FLAGS_on_worker_failure);
  return s;
}

// The chief's own settings (the run's are chief::CheckRunSettings's), before
// it reads anything or starts its server. An error names the flag and what
// it accepts.
absl::Status CheckChiefFlags() {
  PSTRAIN_RETURN_IF_ERROR(FlagAtLeast(
      "print_every_steps", absl::GetFlag(FLAGS_print_every_steps), 1));
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("wait_for_tasks_seconds",
                  absl::GetFlag(FLAGS_wait_for_tasks_seconds), 1));
  PSTRAIN_RETURN_IF_ERROR(
      FlagInRange("threads", absl::GetFlag(FLAGS_threads), 0, kMaxThreads));
  PSTRAIN_RETURN_IF_ERROR(
      FlagInRange("port", absl::GetFlag(FLAGS_port), 0, 65535));
  PSTRAIN_RETURN_IF_ERROR(FlagAtLeast(
      "keep_checkpoints", absl::GetFlag(FLAGS_keep_checkpoints), 1));
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("checkpoint_every_steps",
                  absl::GetFlag(FLAGS_checkpoint_every_steps), 0));
  PSTRAIN_RETURN_IF_ERROR(FlagAtLeast(
      "checkpoint_every_secs", absl::GetFlag(FLAGS_checkpoint_every_secs), 0));
  if (absl::GetFlag(FLAGS_model_dir).empty()) {
    return absl::InvalidArgumentError("--model_dir: must not be empty");
  }
  if (absl::GetFlag(FLAGS_failure_timeout) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--failure_timeout: ",
                     absl::FormatDuration(absl::GetFlag(FLAGS_failure_timeout)),
                     " must be > 0 (e.g. 10s)"));
  }
  return chief::CheckRunSettings(RunSettingsFromFlags());
}

// --export_safetensors: the newest good checkpoint's variables to a file.
int ExportSafetensors(const std::string& path) {
  const std::string model_dir = absl::GetFlag(FLAGS_model_dir);
  absl::StatusOr<chief::LoadedCheckpoint> checkpoint =
      chief::FindLatestGoodCheckpoint(model_dir, [](absl::string_view line) {
        LogError(absl::StrCat("chief: ", line));
      });
  absl::StatusOr<std::vector<chief::WholeVariable>> variables =
      checkpoint.ok() ? chief::ReadVariables(checkpoint->dir, checkpoint->index,
                                             /*with_slots=*/false)
                      : checkpoint.status();
  absl::Status status = variables.status();
  if (status.ok()) status = chief::WriteSafetensors(path, *variables);
  if (!status.ok()) {
    return FailTask("chief", absl::StrCat("export: ", status.message()));
  }
  LogInfo(absl::StrCat("chief: exported ", variables->size(), " variables of ",
                       checkpoint->dir, " (step ", checkpoint->index.step(),
                       ") to ", path));
  return 0;
}

// The run id of the newest readable checkpoint index (a resumed run keeps
// it), or a new one.
std::string RunIdFromCheckpoints(const std::string& model_dir) {
  for (const chief::CheckpointRef& ref :
       chief::ListCompleteCheckpoints(model_dir)) {
    absl::StatusOr<CheckpointIndex> index = chief::ReadCheckpointIndex(ref.dir);
    if (index.ok() && !index->run_id().empty()) return index->run_id();
  }
  return "";
}

std::string NewRunId() {
  std::random_device device;
  return absl::StrFormat("run-%08x%08x", device(), device());
}

int Main() {
  BlockTerminationSignals();
  TuneMallocForLargeBuffers();
  // SIGTERM (Kubernetes deleting the pod) or Ctrl-C ends the chief at once,
  // whatever it is waiting for. Its state is in the checkpoints, written
  // atomically: the ps tasks and workers wait (--chief_patience) for a chief
  // started again, which resumes the run from the newest one.
  std::thread([] {
    const std::string signal = WaitForTerminationSignal();
    LogInfo(absl::StrCat("chief: ", signal,
                         ": exiting; a chief started "
                         "again with the same --model_dir resumes the run "
                         "from its newest checkpoint"));
    std::_Exit(signal == "SIGTERM" ? 128 + SIGTERM : 128 + SIGINT);
  }).detach();
  DisableMutexDeadlockDetection();
  if (!absl::GetFlag(FLAGS_export_safetensors).empty()) {
    return ExportSafetensors(absl::GetFlag(FLAGS_export_safetensors));
  }
  if (absl::Status flags = CheckChiefFlags(); !flags.ok()) {
    return FailUsage(flags.message());
  }

  absl::StatusOr<TfConfig> tf_config =
      ReadTfConfig(absl::GetFlag(FLAGS_tf_config), std::getenv("TF_CONFIG"),
                   JOB_CHIEF, JOB_EVALUATOR);
  if (!tf_config.ok()) return FailUsage(tf_config.status().message());
  // The chief's role adds its own token; an evaluator's is a worker's.
  absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
       absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_auth_token_file),
       absl::GetFlag(FLAGS_chief_token_file)},
      tf_config->task.job());
  if (!security.ok()) return FailUsage(security.status().message());
  if (tf_config->task.job() == JOB_EVALUATOR) {
    chief::EvaluatorTaskOptions options;
    options.data_dir = absl::GetFlag(FLAGS_data_dir);
    options.model_dir = absl::GetFlag(FLAGS_model_dir);
    options.patience =
        absl::Seconds(absl::GetFlag(FLAGS_wait_for_tasks_seconds));
    options.threads = absl::GetFlag(FLAGS_threads);
    const absl::Status status =
        chief::RunEvaluatorTask(*tf_config, *security, options);
    if (!status.ok()) return FailStart(status, "evaluator");
    LogInfo("evaluator: the run is finished");
    return 0;
  }
  const ClusterSpec& cluster = tf_config->cluster;
  absl::StatusOr<chief::RunSetup> run =
      chief::SetUpRun(RunSettingsFromFlags(), cluster);
  if (!run.ok()) return FailUsage(run.status().message());
  if (absl::Status writable =
          CheckWritableDirectory(absl::GetFlag(FLAGS_model_dir));
      !writable.ok()) {
    return FailUsage(absl::StrCat("--model_dir: ", writable.message()));
  }
  // One chief per directory: two runs in one (two clusters left at the
  // default --model_dir) would resume from and prune each other's
  // checkpoints.
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  absl::StatusOr<std::unique_ptr<FileLock>> model_dir_lock = FileLock::Acquire(
      absl::GetFlag(FLAGS_model_dir) + "/chief.lock",
      absl::StrCat("the chief with pid ", getpid(), " on ", host, ", started ",
                   absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", absl::Now(),
                                    absl::UTCTimeZone())));
  if (absl::IsUnimplemented(model_dir_lock.status())) {
    LogError(absl::StrCat("chief: ", model_dir_lock.status().message(),
                          "; going on without guarding --model_dir against "
                          "another run"));
  } else if (!model_dir_lock.ok()) {
    return FailUsage(absl::StrCat(
        "--model_dir: ", model_dir_lock.status().message(),
        absl::IsFailedPrecondition(model_dir_lock.status())
            ? ": another run uses this directory (give this one its own)"
            : ""));
  }
  const bool collective = run->collective;
  const TrainingConfig& config = run->config;
  const worker::ModelSpec& spec = run->spec;
  const int num_ps = cluster.NumTasks(JOB_PS);
  const int num_workers = cluster.NumTasks(JOB_WORKER);
  if (std::string line =
          chief::DescribeEmbeddings(spec.variables, config.optimizer());
      !line.empty()) {
    LogInfo(absl::StrCat("chief: ", line));
  }

  chief::DriverOptions driver_options;
  // A growing table is evaluated on a mirror of the rows a batch names.
  absl::StatusOr<std::unique_ptr<worker::Backend>> evaluator =
      chief::CreateEvaluationBackend(
          worker::WithLocalTables(spec, driver_options.eval_batch), config,
          absl::GetFlag(FLAGS_threads));
  if (!evaluator.ok()) {
    return FailUsage(absl::StrCat("--model: ", evaluator.status().message()));
  }
  LogInfo(absl::StrCat("chief: loss ",
                       worker::DescribeLoss(spec, config.loss()),
                       absl::GetFlag(FLAGS_loss).empty()
                           ? " (the model's default; --loss to change it)"
                           : ""));

  std::string run_id = RunIdFromCheckpoints(absl::GetFlag(FLAGS_model_dir));
  if (run_id.empty()) run_id = NewRunId();
  chief::RunState state(run_id, config, run->placement, cluster,
                        run->length.steps_per_epoch, run->length.total_steps,
                        collective);
  chief::ChiefService service(&state, security->auth_token);
  absl::StatusOr<HostPort> address =
      ListenAddress(*tf_config, absl::GetFlag(FLAGS_port));
  if (!address.ok()) return FailUsage(address.status().message());
  MetricsRegistry metrics;
  AddProcessMetrics(&metrics, "chief", "cpu");
  chief::ChiefMetrics chief_metrics(&metrics, &state);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      ServeMetricsOnPort(address->host, absl::GetFlag(FLAGS_metrics_port),
                         &metrics, "chief");
  if (!metrics_server.ok()) return FailStart(metrics_server.status(), "chief");
  int bound_port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartPstrainServer(
      address->ToString(), {&service}, &bound_port, *security);
  if (!server.ok()) return FailTask("chief", server.status().message());
  LogInfo(absl::StrCat(
      "chief listening on ", HostPort{address->host, bound_port}.ToString(),
      " (", DescribeGrpcSecurity(*security), "); run ", run_id, ": model ",
      config.model_name(), " (", worker::ParameterCount(spec), " parameters), ",
      absl::GetFlag(FLAGS_mode), ", ", num_ps, " ps, ", num_workers,
      " workers, ", run->length.total_steps, " steps of ", num_workers, " x ",
      config.batch_size_per_worker(), " examples; ", BuildInfo()));

  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (int index : cluster.TaskIndices(JOB_PS)) {
    ps::PsClientOptions options;
    options.run_id = run_id;
    options.sender = tf_config->task;
    clients.push_back(std::make_unique<ps::PsClient>(
        CreatePstrainChannel(
            cluster.Address(MakeTask(JOB_PS, index))->ToString(), *security),
        options));
  }
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> ps;
  if (!collective) {
    ps = ps::PsClusterClient::Create(std::move(clients), run->placement,
                                     spec.variables);
    if (!ps.ok()) return FailUsage(ps.status().message());
  }

  driver_options.model_dir = absl::GetFlag(FLAGS_model_dir);
  driver_options.criteo_test_files = run->criteo_test_files;
  driver_options.skip_bad_lines = config.skip_bad_lines();
  driver_options.wait_for_tasks =
      absl::Seconds(absl::GetFlag(FLAGS_wait_for_tasks_seconds));
  driver_options.print_every_steps = absl::GetFlag(FLAGS_print_every_steps);
  driver_options.checkpoint_every_steps =
      absl::GetFlag(FLAGS_checkpoint_every_steps);
  driver_options.checkpoint_every =
      absl::Seconds(absl::GetFlag(FLAGS_checkpoint_every_secs));
  driver_options.failure_timeout = absl::GetFlag(FLAGS_failure_timeout);
  driver_options.continue_without_dead_workers =
      absl::GetFlag(FLAGS_on_worker_failure) == "continue";
  driver_options.evaluator_task = cluster.NumTasks(JOB_EVALUATOR) > 0;
  if (*metrics_server != nullptr) driver_options.metrics = &chief_metrics;
  chief::CheckpointerOptions checkpointer_options;
  checkpointer_options.model_dir = driver_options.model_dir;
  checkpointer_options.run_id = run_id;
  checkpointer_options.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  driver_options.collective = collective;
  if (collective) {
    // The checkpoint of step 0 (the replicas' initial values, from the
    // run's seed); worker 0 writes the later ones.
    checkpointer_options.save_slices = [&spec, &config](const std::string& dir,
                                                        int64_t) {
      return worker::SaveInitialReplica(spec.variables, config.optimizer(),
                                        dir);
    };
  }
  ps::PsClusterClient* const ps_client = collective ? nullptr : ps->get();
  chief::Checkpointer checkpointer(checkpointer_options, &config,
                                   &run->placement, ps_client);
  chief::Driver driver(driver_options, &state, &config, &spec, ps_client,
                       evaluator->get(), &run->test, &checkpointer);
  const absl::Status status = driver.Run();
  (*server)->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLine(
      argc, argv, "chief",
      "Runs a pstrain training run: waits for the ps and worker tasks of "
      "TF_CONFIG, trains, evaluates each epoch and writes checkpoints.\n\n"
      "  TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": \"chief\", "
      "\"index\": 0}}' \\\n"
      "    chief --model=cnn --optimizer=adam --epochs=2 --model_dir=/tmp/run\n"
      "  chief --export_safetensors=model.safetensors --model_dir=/tmp/run\n\n"
      "Exits 0 when the run succeeded, 1 when it failed, 2 on a bad flag or "
      "TF_CONFIG.");
  return pstrain::Main();
}
