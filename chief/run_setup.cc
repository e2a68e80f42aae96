#include "chief/run_setup.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/placement.h"
#include "common/status_macros.h"
#include "common/strategy.h"
#include "compute/cpu/bf16_support.h"
#include "compute/loss_config.h"
#include "compute/precision.h"
#include "data/criteo_batch_source.h"
#include "data/criteo_files.h"
#include "data/criteo_reader.h"
#include "data/data_dir.h"
#include "data/model_input.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"
#include "parallel/layout_map.h"
#include "parallel/tensor_parallel_setup.h"

namespace pstrain {
namespace chief {
namespace {

absl::Status AtLeast(absl::string_view flag, int64_t value, int64_t min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", value, " must be >= ", min));
}

// "--flag: \"value\" must be a or b" unless value is one of `choices`.
absl::Status OneOf(absl::string_view flag, const std::string& value,
                   std::initializer_list<absl::string_view> choices,
                   absl::string_view accepted) {
  for (absl::string_view choice : choices) {
    if (value == choice) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": \"", value, "\" ", accepted));
}

// A collective run's settings: what it cannot do is refused, not ignored.
absl::Status CheckCollective(const RunSettings& s) {
  const std::string why =
      " (TF_CONFIG has no \"ps\" job: a collective run, where every step "
      "all-reduces every worker's gradient)";
  if (s.mode != "sync") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode: ", s.mode, " needs ps tasks; use sync", why));
  }
  if (s.replicas_to_aggregate != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicas_to_aggregate: needs ps tasks", why));
  }
  if (s.on_worker_failure != "wait") {
    return absl::InvalidArgumentError(
        absl::StrCat("--on_worker_failure: ", s.on_worker_failure,
                     " needs ps tasks; use wait", why));
  }
  return absl::OkStatus();
}

// The model of `s` with its growing tables, its loss and optimizers, into
// `run->spec` and `run->config`.
absl::Status SetUpModel(const RunSettings& s, RunSetup* run) {
  TrainingConfig& config = run->config;
  config.set_model_name(s.model);
  absl::StatusOr<std::string> json = worker::LoadModelJson(s.model);
  if (!json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", json.status().message()));
  }
  config.set_model_json(*std::move(json));
  config.set_seed(s.seed);
  absl::StatusOr<worker::ModelSpec> spec =
      worker::ParseKerasModel(config.model_json(), config.seed());
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", spec.status().message()));
  }
  run->spec = *std::move(spec);
  for (absl::string_view layer :
       absl::StrSplit(s.dynamic_embeddings, ',', absl::SkipWhitespace())) {
    config.add_dynamic_embeddings(std::string(layer));
  }
  const std::vector<std::string> dynamic(config.dynamic_embeddings().begin(),
                                         config.dynamic_embeddings().end());
  PSTRAIN_RETURN_IF_ERROR(worker::MakeEmbeddingsDynamic(dynamic, &run->spec));
  PSTRAIN_ASSIGN_OR_RETURN(
      *config.mutable_loss(),
      worker::ChooseLoss(run->spec, s.model, s.loss, s.from_logits));
  PSTRAIN_ASSIGN_OR_RETURN(*config.mutable_optimizer(),
                           ChooseOptimizer(s.optimizer));
  PSTRAIN_RETURN_IF_ERROR(ApplyEmbeddingSettings(
      s.embedding, config.optimizer(), &run->spec.variables));
  for (const VariableDef& v : run->spec.variables) *config.add_variables() = v;
  if (run->collective) {
    for (const VariableDef& v : run->spec.variables) {
      if (!v.sparse()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: no \"ps\" job (a collective run), but the model's '",
          v.name(),
          "' is an embedding table, which only ps tasks hold; add a \"ps\" "
          "job"));
    }
  }
  return absl::OkStatus();
}

// --data_format=criteo: the files are listed and the training lines
// counted; the data is streamed by the workers and the chief's evaluation.
absl::Status SetUpCriteoData(const RunSettings& s, RunSetup* run) {
  absl::StatusOr<std::vector<std::string>> train_files = data::ListCriteoFiles(
      s.data_dir, data::CriteoPatternsOr(s.train_files, "train"));
  absl::StatusOr<std::vector<std::string>> test_files = data::ListCriteoFiles(
      s.data_dir, data::CriteoPatternsOr(s.test_files, "test"));
  for (const auto* files : {&train_files, &test_files}) {
    if (!files->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_dir: ", files->status().message()));
    }
  }
  for (const std::string& file : *test_files) {
    if (std::find(train_files->begin(), train_files->end(), file) !=
        train_files->end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_dir: ", file,
          " is both a training file and a test file (--train_files, "
          "--test_files)"));
    }
  }
  run->config.mutable_train_files()->Assign(s.train_files.begin(),
                                            s.train_files.end());
  run->config.mutable_test_files()->Assign(s.test_files.begin(),
                                           s.test_files.end());
  PSTRAIN_RETURN_IF_ERROR(worker::CheckCriteoModel(run->spec).status());
  if (run->config.loss().kind() != LossConfig::BINARY_CROSSENTROPY) {
    return absl::InvalidArgumentError(
        "--data_format=criteo: the labels are clicks (0 or 1): the "
        "loss must be binary_crossentropy");
  }
  absl::StatusOr<int64_t> lines = data::CountCriteoLines(*train_files);
  if (!lines.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_dir: ", lines.status().message()));
  }
  run->config.set_num_train_lines(*lines);
  run->criteo_test_files = *std::move(test_files);
  return absl::OkStatus();
}

// The training and test sets of --data_dir, in memory, checked against the
// model and its loss.
absl::Status SetUpData(const RunSettings& s, RunSetup* run) {
  for (auto [split, data] : {std::make_pair(data::Split::kTrain, &run->train),
                             std::make_pair(data::Split::kTest, &run->test)}) {
    absl::StatusOr<data::Dataset> read = data::ReadDataDir(s.data_dir, split);
    if (!read.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_dir: ", read.status().message()));
    }
    *data = *std::move(read);
  }
  // Ids for a model that starts with an Embedding (only the test set is
  // fed to it here; the training set's size is what counts).
  PSTRAIN_RETURN_IF_ERROR(worker::FitDatasetToModel(run->spec, &run->test));
  for (const auto& [data, what] :
       {std::make_pair(&run->train, "the training data"),
        std::make_pair(&run->test, "the test data")}) {
    PSTRAIN_RETURN_IF_ERROR(worker::CheckLabelsFitLoss(
        run->config.loss(), run->spec, data->labels, what));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRunSettings(const RunSettings& s) {
  PSTRAIN_RETURN_IF_ERROR(AtLeast("batch_size", s.batch_size, 1));
  PSTRAIN_RETURN_IF_ERROR(AtLeast("epochs", s.epochs, 1));
  PSTRAIN_RETURN_IF_ERROR(AtLeast("steps", s.steps, 0));
  PSTRAIN_RETURN_IF_ERROR(
      AtLeast("replicas_to_aggregate", s.replicas_to_aggregate, 0));
  PSTRAIN_RETURN_IF_ERROR(AtLeast("max_staleness", s.max_staleness, -1));
  if (s.step_timeout_seconds < 1 || s.step_timeout_seconds > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--step_timeout_seconds: ", s.step_timeout_seconds,
                     " must be in [1, 1000000]"));
  }
  PSTRAIN_RETURN_IF_ERROR(OneOf("on_worker_failure", s.on_worker_failure,
                                {"wait", "continue"},
                                "is not wait or continue"));
  PSTRAIN_RETURN_IF_ERROR(
      OneOf("mode", s.mode, {"sync", "async"}, "is not sync or async"));
  // A setting of the other mode would do nothing: refused, not ignored.
  if (s.mode == "sync" && s.max_staleness != -1) {
    return absl::InvalidArgumentError(
        "--max_staleness: applies to --mode=async only");
  }
  if (s.mode == "async" && s.replicas_to_aggregate != 0) {
    return absl::InvalidArgumentError(
        "--replicas_to_aggregate: applies to --mode=sync only");
  }
  PSTRAIN_RETURN_IF_ERROR(OneOf("allreduce_dtype", s.allreduce_dtype,
                                {"float32", "bf16"},
                                "must be float32 or bf16"));
  PSTRAIN_RETURN_IF_ERROR(OneOf("data_format", s.data_format, {"", "criteo"},
                                "must be empty or criteo"));
  PSTRAIN_RETURN_IF_ERROR(OneOf("bad_lines", s.bad_lines, {"refuse", "skip"},
                                "must be refuse or skip"));
  PSTRAIN_RETURN_IF_ERROR(
      data::CheckCriteoPatterns(s.train_files, "train_files"));
  PSTRAIN_RETURN_IF_ERROR(
      data::CheckCriteoPatterns(s.test_files, "test_files"));
  if (s.data_format != "criteo" &&
      !(s.train_files.empty() && s.test_files.empty())) {
    return absl::InvalidArgumentError(
        "--train_files, --test_files: apply to --data_format=criteo only");
  }
  if (absl::Status precision = worker::ParsePrecision(s.precision).status();
      !precision.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision: ", precision.message()));
  }
  PSTRAIN_RETURN_IF_ERROR(worker::CheckLossFlags(s.loss, s.from_logits));
  PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingSettings(s.embedding));
  return ChooseOptimizer(s.optimizer).status();
}

// --mesh and --layout_map, checked against the model and the workers
// (parallel/tensor_parallel_setup.h) and put in the config; the number of
// data-parallel groups, whose batches make a step's global batch.
absl::StatusOr<int> SetUpTensorParallelRun(const RunSettings& s,
                                           int num_workers, RunSetup* run) {
  std::string layout_json;
  if (!s.layout_map.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(layout_json,
                             parallel::ReadLayoutMapFile(s.layout_map));
  }
  PSTRAIN_ASSIGN_OR_RETURN(parallel::TensorParallelSetup setup,
                           parallel::SetUpTensorParallel(
                               run->spec, s.mesh, layout_json, num_workers));
  if (setup.mesh.model > 1) {
    // What the tensor-parallel workers do not do yet, refused rather than
    // run wrong.
    if (run->collective) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mesh=", s.mesh, ": model-parallel groups run with ps tasks ",
          "only (TF_CONFIG has no \"ps\" job)"));
    }
    if (s.mode != "sync" || s.replicas_to_aggregate != 0 ||
        s.on_worker_failure != "wait") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mesh=", s.mesh, ": model-parallel groups need --mode=sync, ",
          "--replicas_to_aggregate=0 and --on_worker_failure=wait (a group's "
          "members compute each step together)"));
    }
    if (s.data_format == "criteo" || s.precision != "fp32") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mesh=", s.mesh, ": model-parallel groups train in-memory data ",
          "in fp32 only"));
    }
  }
  run->config.set_mesh(s.mesh);
  run->config.set_layout_map(layout_json);
  return setup.mesh.data;
}

absl::StatusOr<RunSetup> SetUpRun(const RunSettings& s,
                                  const ClusterSpec& cluster) {
  RunSetup run;
  PSTRAIN_ASSIGN_OR_RETURN(Strategy strategy,
                           ResolveStrategy(s.strategy, cluster));
  run.collective = strategy == Strategy::kMultiWorkerMirrored;
  const int num_workers = cluster.NumTasks(JOB_WORKER);
  if (num_workers == 0) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: cluster: a run needs at least one \"worker\" task");
  }
  if (run.collective) PSTRAIN_RETURN_IF_ERROR(CheckCollective(s));
  if (!run.collective && s.allreduce_dtype != "float32") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allreduce_dtype: ", s.allreduce_dtype,
        " applies to collective runs only (TF_CONFIG has a \"ps\" job: the "
        "workers push float32 gradients to the ps tasks)"));
  }
  if (s.replicas_to_aggregate > num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replicas_to_aggregate: ", s.replicas_to_aggregate,
        " must be in [0, ", num_workers, "] (TF_CONFIG's workers)"));
  }
  PSTRAIN_RETURN_IF_ERROR(SetUpModel(s, &run));
  TrainingConfig& config = run.config;
  config.set_data_format(s.data_format);
  config.set_skip_bad_lines(s.bad_lines == "skip");
  config.set_allreduce_dtype(s.allreduce_dtype);
  // This CPU's answer: each worker checks its own too.
  PSTRAIN_ASSIGN_OR_RETURN(worker::Precision precision,
                           worker::ParsePrecision(s.precision));
  PSTRAIN_RETURN_IF_ERROR(worker::cpu::CheckCpuPrecision(precision));
  config.set_precision(std::string(worker::PrecisionName(precision)));
  UpdateConfig* update = config.mutable_update();
  update->set_mode(s.mode == "sync" ? UpdateConfig::SYNC : UpdateConfig::ASYNC);
  update->set_num_workers(num_workers);
  update->set_replicas_to_aggregate(s.replicas_to_aggregate);
  update->set_max_staleness(s.max_staleness);
  update->set_step_timeout_ms(int64_t{s.step_timeout_seconds} * 1000);
  config.set_batch_size_per_worker(s.batch_size);
  config.set_epochs(s.epochs);
  config.set_steps(s.steps);
  PSTRAIN_ASSIGN_OR_RETURN(const int data_groups,
                           SetUpTensorParallelRun(s, num_workers, &run));

  PlacementOptions placement;
  placement.num_ps = run.collective ? 1 : cluster.NumTasks(JOB_PS);
  PSTRAIN_ASSIGN_OR_RETURN(run.placement,
                           ComputePlacement(run.spec.variables, placement));

  const bool criteo = s.data_format == "criteo";
  PSTRAIN_RETURN_IF_ERROR(criteo ? SetUpCriteoData(s, &run)
                                 : SetUpData(s, &run));
  PSTRAIN_ASSIGN_OR_RETURN(
      run.length, data::ComputeRunLength(
                      config, data_groups,
                      criteo ? config.num_train_lines() : run.train.size()));
  return run;
}

}  // namespace chief
}  // namespace pstrain
