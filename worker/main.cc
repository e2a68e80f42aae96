// The `worker` binary: one worker task of a pstrain run.
//
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}'
//   worker
//
// Serves gRPC's health check at its TF_CONFIG address, registers with the
// chief (waiting for it to come up), receives the model, the placement and
// the run's settings, trains its share of every step and exits 0 once the
// chief says the run is finished (1 if it failed, 2 on a bad flag or
// TF_CONFIG).
//
// In a collective run (TF_CONFIG without a "ps" job: MultiWorkerMirrored-
// Strategy) the worker holds the whole model (collective/local_replica.h) and
// all-reduces its gradients with the other workers in a ring in the order
// of TF_CONFIG's worker list; its ring server listens at its TF_CONFIG
// address, beside the health check. Worker 0 writes the run's checkpoints
// into --model_dir (the chief's, shared) and every worker restores from
// there (collective/replica_checkpoint.h).
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpointer.h"
#include "chief/chief_client.h"
#include "collective/local_replica.h"
#include "collective/nccl_rendezvous.h"
#include "collective/replica_checkpoint.h"
#include "collective/ring_participant.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/flag_range.h"
#include "common/grpc_options.h"
#include "common/grpc_security.h"
#include "common/health_server.h"
#include "common/metrics.h"
#include "common/metrics_server.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "common/strategy.h"
#include "common/task_security.h"
#include "common/tf_config.h"
#include "compute/cpu/openmp_wait_policy.h"
#include "compute/device_backend.h"
#include "compute/loss_config.h"
#include "compute/precision.h"
#include "data/criteo_batch_source.h"
#include "data/criteo_files.h"
#include "data/data_dir.h"
#include "data/model_input.h"
#include "grpcpp/health_check_service_interface.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"
#include "parallel/model_parallel_worker.h"
#include "parallel/tensor_parallel_setup.h"
#include "ps/ps_client.h"
#include "worker/nccl_id_relay.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG JSON, or @path to a file holding it; default: the "
          "TF_CONFIG environment variable");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "The training data: train.csv (numeric or id features, then an "
          "integer label; data/data_dir.h), else Fashion-MNIST IDX "
          "files ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)");
ABSL_FLAG(std::string, device, "auto",
          "auto, cpu, gpu or gpu:N: where the model computes; auto uses the "
          "CPU when there is no GPU");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics at http://<host>:<port>/metrics, where "
          "<host> is this task's TF_CONFIG host (0: off)");
ABSL_FLAG(int, threads, 0, "CPU compute threads (0 to 1024; 0: one per core)");
ABSL_FLAG(int, chief_patience_seconds, 300,
          "How long to wait for the chief to answer");
ABSL_FLAG(int, report_every_steps, 20, "Report metrics every this many steps");
ABSL_FLAG(int, push_delay_ms, 0,
          "Sleep this long before each push: a straggler on purpose, to see "
          "backup workers (--replicas_to_aggregate) at work");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate of this task, signed by --tls_ca: turns on mutual "
          "TLS for every channel (with --tls_key and --tls_ca)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM certificate of the cluster CA: the only issuer whose "
          "certificates this task accepts from the chief and the ps");
ABSL_FLAG(std::string, model_dir, "/tmp/pstrain",
          "Collective runs (no ps): the run's directory, shared with the "
          "chief (its --model_dir): worker 0 writes the checkpoints there "
          "and every worker restores from there. Unused with ps tasks");
ABSL_FLAG(std::string, allreduce_dtype, "",
          "Collective runs: the chief's --allreduce_dtype decides what the "
          "all-reduce sends; given here too (float32 or bf16), it must "
          "agree with the chief's, or the worker exits 2");
ABSL_FLAG(int, allreduce_timeout_seconds, 30,
          "Collective runs: how long an all-reduce waits for a silent "
          "neighbour before the step fails");
ABSL_FLAG(std::string, allreduce_backend, "auto",
          "Collective runs: ring (the gRPC ring, from host memory), nccl "
          "(NCCL among the workers' GPUs; every worker must compute on a "
          "GPU) or auto: nccl when this worker computes on a GPU");
ABSL_FLAG(bool, allreduce_overlap, true,
          "Collective runs: all-reduce each bucket of gradients as soon as "
          "the backward pass has computed it (false: all of them after the "
          "backward, to measure what the overlap saves)");
ABSL_FLAG(std::string, export_replica_dir, "",
          "Collective runs: at the end, write this worker's copy of the "
          "variables to <dir>/worker-<index>.safetensors (to compare the "
          "replicas)");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the cluster's shared token (a trailing newline is "
          "dropped): sent on every call");

namespace pstrain {
namespace {

// Every worker's address ("host:port"), by task index.
std::vector<std::string> WorkerAddresses(const ClusterSpec& cluster) {
  std::vector<std::string> addresses;
  for (int w : cluster.TaskIndices(JOB_WORKER)) {
    addresses.push_back(cluster.Address(MakeTask(JOB_WORKER, w))->ToString());
  }
  return addresses;
}

// The backend --device asks for, with a log line saying where it computes.
// Sets *device to where it computes.
absl::StatusOr<std::unique_ptr<worker::Backend>> MakeBackend(
    const worker::ModelSpec& spec, const TrainingConfig& config, int index,
    std::string* device) {
  worker::DeviceBackendOptions options;
  options.device = absl::GetFlag(FLAGS_device);
  options.cpu_threads = absl::GetFlag(FLAGS_threads);
  options.run_seed = config.seed();
  options.replica = index;
  const worker::BackendLoss loss = worker::ToBackendLoss(config.loss());
  options.loss = loss.kind;
  options.loss_input = loss.input;
  absl::StatusOr<worker::Precision> precision =
      worker::ParsePrecision(config.precision());
  if (!precision.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chief's --precision: ", precision.status().message(),
                     " (a chief newer than this worker?)"));
  }
  options.precision = *precision;
  PSTRAIN_ASSIGN_OR_RETURN(worker::DeviceBackend made,
                           worker::CreateDeviceBackend(spec, options));
  LogInfo(absl::StrCat("worker ", index, ": computing on ", made.description));
  *device = made.description;
  return std::move(made.backend);
}

// The worker's own flags, before it reads anything or contacts anyone. An
// error names the flag and what it accepts.
absl::Status CheckWorkerFlags() {
  const std::string allreduce_dtype = absl::GetFlag(FLAGS_allreduce_dtype);
  if (!allreduce_dtype.empty() && allreduce_dtype != "float32" &&
      allreduce_dtype != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--allreduce_dtype: \"", allreduce_dtype,
                     "\" must be float32 or bf16 (or unset: the chief's)"));
  }
  const std::string backend = absl::GetFlag(FLAGS_allreduce_backend);
  if (backend != "auto" && backend != "ring" && backend != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allreduce_backend: \"", backend, "\" must be auto, ring or nccl"));
  }
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("allreduce_timeout_seconds",
                  absl::GetFlag(FLAGS_allreduce_timeout_seconds), 1));
  PSTRAIN_RETURN_IF_ERROR(
      FlagInRange("threads", absl::GetFlag(FLAGS_threads), 0, kMaxThreads));
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("chief_patience_seconds",
                  absl::GetFlag(FLAGS_chief_patience_seconds), 1));
  PSTRAIN_RETURN_IF_ERROR(FlagAtLeast(
      "report_every_steps", absl::GetFlag(FLAGS_report_every_steps), 1));
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("push_delay_ms", absl::GetFlag(FLAGS_push_delay_ms), 0));
  if (const std::string dir = absl::GetFlag(FLAGS_export_replica_dir);
      !dir.empty()) {
    absl::Status writable = CheckWritableDirectory(dir);
    if (!writable.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--export_replica_dir: ", writable.message()));
    }
  }
  return worker::CheckDeviceName(absl::GetFlag(FLAGS_device));
}

int Main() {
  TuneMallocForLargeBuffers();
  DisableMutexDeadlockDetection();
  absl::StatusOr<TfConfig> tf_config = ReadTfConfig(
      absl::GetFlag(FLAGS_tf_config), std::getenv("TF_CONFIG"), JOB_WORKER);
  if (!tf_config.ok()) return FailUsage(tf_config.status().message());
  // The cluster says the strategy (the chief's --strategy can only agree).
  const bool collective = *ResolveStrategy("auto", tf_config->cluster) ==
                          Strategy::kMultiWorkerMirrored;
  if (absl::Status flags = CheckWorkerFlags(); !flags.ok()) {
    return FailUsage(flags.message());
  }
  const int index = tf_config->task.index();
  const std::string task = absl::StrCat("worker ", index);
  absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
       absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_auth_token_file),
       /*chief_token_file=*/""},  // workers are not given the chief's token
      JOB_WORKER);
  if (!security.ok()) return FailUsage(security.status().message());
  absl::StatusOr<HostPort> chief_address =
      tf_config->cluster.Address(MakeTask(JOB_CHIEF, 0));
  if (!chief_address.ok()) {
    return FailUsage("TF_CONFIG: cluster: a worker needs a \"chief\" task");
  }

  // Only gRPC's health check, at the worker's TF_CONFIG address, for
  // Kubernetes' probes and whoever checks that the worker is up.
  absl::StatusOr<HostPort> own_address = ListenAddress(*tf_config, 0);
  if (!own_address.ok()) return FailUsage(own_address.status().message());
  MetricsRegistry metrics;
  worker::WorkerMetrics worker_metrics(&metrics);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      ServeMetricsOnPort(own_address->host, absl::GetFlag(FLAGS_metrics_port),
                         &metrics, task);
  if (!metrics_server.ok()) return FailStart(metrics_server.status(), task);
  int bound_port = 0;
  absl::StatusOr<std::unique_ptr<HealthServer>> health;
  absl::StatusOr<std::unique_ptr<collective::RingParticipant>> ring;
  if (collective) {
    // The ring's server answers the health check too (gRPC's own service:
    // this worker polls nothing else that it could slow down).
    grpc::EnableDefaultHealthCheckService(true);
    collective::RingParticipantOptions ring_options;
    ring_options.rank = index;
    ring_options.peers = WorkerAddresses(tf_config->cluster);
    ring_options.timeout =
        absl::Seconds(absl::GetFlag(FLAGS_allreduce_timeout_seconds));
    ring_options.security = *security;
    ring = collective::RingParticipant::Start(ring_options);
    if (absl::IsInvalidArgument(ring.status())) {
      return FailUsage(absl::StrCat("TF_CONFIG: ", ring.status().message()));
    }
    if (!ring.ok()) {
      return FailTask(task, absl::StrCat("ring all-reduce server: ",
                                         ring.status().message()));
    }
  } else {
    health =
        HealthServer::Start(own_address->ToString(), &bound_port, *security);
    if (!health.ok()) return FailTask(task, health.status().message());
  }

  const absl::Duration patience =
      absl::Seconds(absl::GetFlag(FLAGS_chief_patience_seconds));
  chief::ChiefClient chief(
      CreatePstrainChannel(chief_address->ToString(), *security),
      tf_config->task, tf_config->cluster.ToString());
  // The data first: once registered, the chief expects to hear from the
  // worker within its failure timeout.
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  // Criteo files are streamed as training goes: nothing to read first.
  const bool criteo_names =
      data::ListCriteoFiles(data_dir, data::DefaultCriteoPatterns("train"))
          .ok();
  absl::StatusOr<data::Dataset> train =
      criteo_names ? absl::StatusOr<data::Dataset>(data::Dataset())
                   : data::ReadDataDir(data_dir, data::Split::kTrain);
  // A directory without a data set may hold Criteo files of other names
  // (the chief's --train_files): the run's config tells. One that cannot
  // be read at all fails now.
  if (!train.ok() && access(data_dir.c_str(), R_OK | X_OK) != 0) {
    return FailUsage(train.status().message());
  }
  absl::StatusOr<RegisterResponse> run = chief.Register(patience);
  if (!run.ok()) {
    return FailTask(task, absl::StrCat("cannot register with the chief at ",
                                       chief_address->ToString(), ": ",
                                       run.status().message()));
  }
  const TrainingConfig& config = run->config();
  if (collective) {
    // The run's all-reduce dtype is the chief's, set before the first step.
    const std::string run_dtype =
        config.allreduce_dtype().empty() ? "float32" : config.allreduce_dtype();
    if (run_dtype != "float32" && run_dtype != "bf16") {
      return FailUsage(absl::StrCat("the chief's run all-reduces in \"",
                                    run_dtype,
                                    "\", which this worker does not know "
                                    "(float32 or bf16)"));
    }
    if (const std::string allreduce_dtype =
            absl::GetFlag(FLAGS_allreduce_dtype);
        !allreduce_dtype.empty() && allreduce_dtype != run_dtype) {
      return FailUsage(
          absl::StrCat("--allreduce_dtype: ", allreduce_dtype,
                       ", but the chief's run ", "all-reduces in ", run_dtype,
                       " (chief --allreduce_dtype); set it on the chief only"));
    }
    if (absl::Status set = (*ring)->ring()->SetDtype(
            run_dtype == "bf16" ? RING_DTYPE_BFLOAT16 : RING_DTYPE_FLOAT32);
        !set.ok()) {
      return FailUsage(set.message());
    }
  }
  absl::StatusOr<worker::ModelSpec> spec = worker::LoadRunModel(config);
  if (!spec.ok()) return FailUsage(spec.status().message());
  const bool criteo = config.data_format() == "criteo";
  worker::OpenCriteoStream open_stream;
  if (criteo) {
    absl::StatusOr<std::vector<std::string>> criteo_files =
        data::ListCriteoFiles(
            data_dir, data::CriteoPatternsOr(config.train_files(), "train"));
    if (!criteo_files.ok()) {
      return FailUsage(
          absl::StrCat("--data_dir: ", criteo_files.status().message()));
    }
    train = data::Dataset();  // streamed: nothing in memory
    absl::StatusOr<worker::CriteoSourceOptions> stream =
        worker::CriteoSourceOptionsFor(
            *spec, *criteo_files, config.update().num_workers(),
            config.batch_size_per_worker(),
            config.skip_bad_lines() ? data::BadLines::kSkip
                                    : data::BadLines::kRefuse);
    if (!stream.ok()) return FailUsage(stream.status().message());
    open_stream = worker::CriteoStreamOpener(*std::move(stream));
  } else {
    if (criteo_names) train = data::ReadDataDir(data_dir, data::Split::kTrain);
    if (!train.ok()) return FailUsage(train.status().message());
    // Ids for a model that starts with an Embedding.
    if (absl::Status fit = worker::FitDatasetToModel(*spec, &*train);
        !fit.ok()) {
      return FailUsage(fit.message());
    }
  }
  std::string device;
  // Tensor model parallelism (the chief's --mesh, --layout_map): a member of
  // a model-parallel group computes its slices, exchanging activations with
  // its group over a gRPC ring at its TF_CONFIG address, whose server then
  // answers the health check in place of the health server.
  absl::StatusOr<parallel::TensorParallelSetup> mesh =
      parallel::SetUpTensorParallel(*spec, config.mesh(), config.layout_map(),
                                    config.update().num_workers());
  if (!mesh.ok()) return FailUsage(mesh.status().message());
  if (mesh->mesh.model > 1 && collective) {
    return FailUsage("--mesh: model-parallel groups run with ps tasks only");
  }
  const parallel::MeshCoordinates at = mesh->mesh.CoordinatesOf(index);
  parallel::ModelParallelWorker model_parallel;
  absl::StatusOr<std::unique_ptr<worker::Backend>> backend;
  if (mesh->mesh.model > 1) {
    health->reset();
    grpc::EnableDefaultHealthCheckService(true);
    parallel::ModelParallelWorkerOptions member;
    member.worker_index = index;
    member.worker_addresses = WorkerAddresses(tf_config->cluster);
    member.timeout =
        absl::Seconds(absl::GetFlag(FLAGS_allreduce_timeout_seconds));
    member.security = *security;
    member.member.run_seed = config.seed();
    const worker::BackendLoss loss = worker::ToBackendLoss(config.loss());
    member.member.loss = loss.kind;
    member.member.loss_input = loss.input;
    member.member.num_threads = absl::GetFlag(FLAGS_threads);
    member.group_bytes_sent = worker_metrics.group_bytes_sent;
    member.group_bytes_received = worker_metrics.group_bytes_received;
    absl::StatusOr<parallel::ModelParallelWorker> started =
        parallel::StartModelParallelWorker(*spec, *mesh, member);
    if (!started.ok()) {
      return FailTask(task, absl::StrCat("model-parallel group: ",
                                         started.status().message()));
    }
    model_parallel = *std::move(started);
    backend = std::move(model_parallel.backend);
    device = model_parallel.device;
    LogInfo(absl::StrCat("worker ", index, ": computing on ", device));
  } else {
    // A growing table is computed on a mirror of the rows a step can touch.
    backend = MakeBackend(
        worker::WithLocalTables(*spec, int64_t{config.batch_size_per_worker()} *
                                           config.update().num_workers()),
        config, index, &device);
  }
  if (!backend.ok()) return FailUsage(backend.status().message());
  AddProcessMetrics(&metrics, "worker", device);
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (const std::string& address : run->ps_addresses()) {
    ps::PsClientOptions options;
    options.run_id = run->run_id();
    options.sender = tf_config->task;
    if (*metrics_server != nullptr) worker_metrics.CountPsCalls(&options);
    clients.push_back(std::make_unique<ps::PsClient>(
        CreatePstrainChannel(address, *security), options));
  }
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> ps;
  std::unique_ptr<worker::LocalReplica> replica;
  // GPU workers all-reduce with NCCL, a communicator per generation.
  std::unique_ptr<collective::NcclRendezvous> nccl;
  const std::string backend_choice = absl::GetFlag(FLAGS_allreduce_backend);
  if (collective &&
      (backend_choice == "nccl" ||
       (backend_choice == "auto" && absl::StartsWith(device, "GPU")))) {
    collective::NcclRendezvousOptions nccl_options;
    nccl_options.rank = index;
    nccl_options.num_ranks = config.update().num_workers();
    // gpu:N computes on GPU N; gpu and auto on every GPU, the first of
    // which all-reduces.
    const std::string device_flag = absl::GetFlag(FLAGS_device);
    if (absl::StartsWith(device_flag, "gpu:") &&
        !absl::SimpleAtoi(device_flag.substr(4), &nccl_options.gpu)) {
      return FailUsage(absl::StrCat("--device: \"", device_flag, "\""));
    }
    nccl_options.dtype = config.allreduce_dtype() == "bf16"
                             ? RING_DTYPE_BFLOAT16
                             : RING_DTYPE_FLOAT32;
    nccl_options.timeout =
        absl::Seconds(absl::GetFlag(FLAGS_allreduce_timeout_seconds));
    worker::RelayNcclIdsThroughChief(&chief, &nccl_options);
    absl::StatusOr<std::unique_ptr<collective::NcclRendezvous>> made =
        collective::NcclRendezvous::Create(nccl_options);
    if (!made.ok()) return FailUsage(made.status().message());
    nccl = *std::move(made);
    LogInfo(absl::StrCat("worker ", index, ": all-reduces with NCCL on GPU ",
                         nccl_options.gpu));
  } else if (collective && backend_choice == "nccl") {
    return FailUsage("--allreduce_backend=nccl: this worker computes on " +
                     device);
  }
  // Collective runs: what the replica sums with, joined at each generation.
  collective::AllReducer* reducer = nullptr;
  if (collective) {
    // The chief refuses a worker whose choice differs from the others'.
    chief.SetAllReduce(nccl != nullptr ? "nccl" : "ring",
                       config.allreduce_dtype().empty()
                           ? "float32"
                           : config.allreduce_dtype());
    if (absl::StatusOr<RegisterResponse> again = chief.Register(patience);
        !again.ok()) {
      return FailTask(task, absl::StrCat("the chief refused it: ",
                                         again.status().message()));
    }
    worker::LocalReplicaOptions replica_options;
    replica_options.variables = spec->variables;
    replica_options.optimizer = config.optimizer();
    reducer = nccl != nullptr ? static_cast<collective::AllReducer*>(nccl.get())
                              : (*ring)->ring();
    replica_options.ring = reducer;
    replica_options.num_workers = config.update().num_workers();
    absl::StatusOr<std::unique_ptr<worker::LocalReplica>> made =
        worker::LocalReplica::Create(replica_options);
    if (!made.ok()) return FailUsage(made.status().message());
    replica = *std::move(made);
  } else {
    ps = ps::PsClusterClient::Create(std::move(clients), run->placement(),
                                     spec->variables);
    if (!ps.ok()) return FailUsage(ps.status().message());
  }

  LogInfo(absl::StrCat(
      "worker ", index, " of ", config.update().num_workers(),
      " registered in run ", run->run_id(), "; ",
      criteo ? config.num_train_lines() : train->size(),
      criteo ? " training lines (Criteo, streamed); " : " training examples; ",
      BuildInfo()));

  absl::StatusOr<RunPhase> phase =
      chief.WaitForPhase([](RunPhase p) { return p >= PHASE_TRAINING; },
                         absl::Milliseconds(100), patience);
  if (!phase.ok() || (*phase != PHASE_TRAINING && *phase != PHASE_PAUSED)) {
    return FailTask(
        task, absl::StrCat("the run did not start: ",
                           phase.ok() ? RunPhase_Name(*phase)
                                      : std::string(phase.status().message())));
  }
  absl::StatusOr<TrainingState> state = chief.GetTrainingState();
  if (!state.ok()) {
    return FailTask(task, absl::StrCat("cannot ask the chief where the run "
                                       "starts: ",
                                       state.status().message()));
  }
  if (state->start_step() > 0) {
    LogInfo(absl::StrCat("worker ", index, ": resuming at step ",
                         state->start_step()));
  }
  worker::TrainerOptions options;
  options.start_step = state->start_step();
  options.generation = state->generation();
  options.restore_pending = state->restore_pending();
  options.chief_patience = patience;
  options.worker_index = index;
  options.num_workers = config.update().num_workers();
  options.data_shard = at.data;
  options.data_shards = mesh->mesh.data;
  options.parts = parallel::MemberParts(*spec, mesh->plans[at.model]);
  options.report_every_steps = absl::GetFlag(FLAGS_report_every_steps);
  options.push_delay = absl::Milliseconds(absl::GetFlag(FLAGS_push_delay_ms));
  options.placement = run->placement();
  if (*metrics_server != nullptr) options.metrics = &worker_metrics;
  options.open_stream = open_stream;
  options.stream_examples = config.num_train_lines();
  const std::string model_dir = absl::GetFlag(FLAGS_model_dir);
  // Collective runs: worker 0 writes the run's checkpoints.
  std::unique_ptr<chief::Checkpointer> checkpointer;
  if (collective && index == 0) {
    if (absl::Status writable = CheckWritableDirectory(model_dir);
        !writable.ok()) {
      return FailUsage(absl::StrCat("--model_dir: ", writable.message()));
    }
    chief::CheckpointerOptions checkpoints;
    checkpoints.model_dir = model_dir;
    checkpoints.run_id = run->run_id();
    // The chief prunes (it knows --keep_checkpoints).
    checkpoints.keep = std::numeric_limits<int>::max();
    checkpoints.writer = task;
    checkpoints.save_slices = [&replica](const std::string& dir, int64_t) {
      return worker::SaveReplica(*replica, dir);
    };
    checkpointer = std::make_unique<chief::Checkpointer>(
        checkpoints, &config, &run->placement(), nullptr);
  }
  if (collective) {
    if (checkpointer != nullptr) {
      const int64_t per_epoch = state->steps_per_epoch();
      options.save_checkpoint = [&checkpointer, per_epoch](int64_t step) {
        return checkpointer->Save(step, per_epoch > 0 ? step / per_epoch : 0)
            .status();
      };
    }
    options.restore = [&replica, &model_dir, index, reducer](
                          int64_t step, int64_t generation) -> absl::Status {
      // A new generation all-reduces in a new NCCL communicator. A join
      // that fails for want of a peer is a peer failure: the Trainer waits
      // for the chief's next generation.
      PSTRAIN_RETURN_IF_ERROR(reducer->Join(generation));
      LogInfo(absl::StrCat("worker ", index, ": restoring ",
                           step > 0 ? chief::CheckpointDir(model_dir, step)
                                    : std::string("the initial values"),
                           " (generation ", generation, ")"));
      return worker::RestoreReplicaAt(model_dir, step, replica.get());
    };
    // The all-reduce overlaps the backward (collective/local_replica.h);
    // without it, PushDense hands every bucket over after the backward.
    if (absl::GetFlag(FLAGS_allreduce_overlap)) {
      options.gradient_ready = [&replica](int64_t step, const std::string& name,
                                          absl::Span<float> gradient) {
        replica->GradientReady(step, name, gradient);
      };
    }
  } else {
    options.embedding_ps = ps->get();
  }
  if (reducer != nullptr && !state->restore_pending()) {
    // A restarted worker joins at the chief's restore instead.
    if (absl::Status joined = reducer->Join(state->generation());
        !joined.ok()) {
      return FailTask(task, absl::StrCat("NCCL: ", joined.message()));
    }
  }
  worker::Trainer trainer(
      options, &config, &*spec, &*train, backend->get(),
      collective ? static_cast<ps::VariableStore*>(replica.get()) : ps->get(),
      &chief);
  absl::Status trained = trainer.Run();
  if (trained.ok() && collective &&
      !absl::GetFlag(FLAGS_export_replica_dir).empty()) {
    trained = worker::ExportReplica(
        *replica, absl::StrCat(absl::GetFlag(FLAGS_export_replica_dir),
                               "/worker-", index, ".safetensors"));
  }
  if (!trained.ok()) return FailTask(task, trained.message());
  // Trainer::Run returns OK once the chief said the run finished.
  LogInfo(absl::StrCat("worker ", index, ": run finished"));
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLine(
      argc, argv, "worker",
      "Runs one worker task of a pstrain run: registers with the chief, "
      "then computes the gradients of its share of every step.\n\n"
      "  TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": "
      "\"worker\", \"index\": 0}}' worker --device=auto\n\n"
      "Exits 0 once the chief says the run is finished, 1 if it failed, 2 on "
      "a bad flag or TF_CONFIG.");
  // Several compute threads: this binary may execute itself again so that
  // they wait without spinning (compute/cpu/openmp_wait_policy.h). One
  // thread waits for no other, and a start costs a second or more.
  if (absl::GetFlag(FLAGS_threads) != 1) {
    const absl::Status openmp =
        pstrain::worker::cpu::ReexecWithOpenMpWaitPolicy(argv);
    if (!openmp.ok()) pstrain::LogError(openmp.ToString());
  }
  return pstrain::Main();
}
