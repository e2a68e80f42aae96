#include "chief/evaluator_task.h"

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_evaluation.h"
#include "chief/chief_client.h"
#include "chief/criteo_evaluation.h"
#include "chief/evaluator.h"
#include "common/grpc_options.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/loss_config.h"
#include "data/criteo_files.h"
#include "data/data_dir.h"
#include "data/model_input.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"

namespace pstrain {
namespace chief {

absl::StatusOr<std::unique_ptr<worker::Backend>> CreateEvaluationBackend(
    const worker::ModelSpec& spec, const TrainingConfig& config, int threads) {
  worker::CpuBackendOptions options;
  options.num_threads = threads;
  options.run_seed = config.seed();
  const worker::BackendLoss loss = worker::ToBackendLoss(config.loss());
  options.loss = loss.kind;
  options.loss_input = loss.input;
  return worker::CreateCpuBackend(spec, options);
}

namespace {

// CreateEvaluationBackend, its error INVALID_ARGUMENT (the model's).
absl::StatusOr<std::unique_ptr<worker::Backend>> CreateBackendOrRefuse(
    const worker::ModelSpec& spec, const TrainingConfig& config, int threads) {
  absl::StatusOr<std::unique_ptr<worker::Backend>> backend =
      CreateEvaluationBackend(spec, config, threads);
  if (!backend.ok()) {
    return absl::InvalidArgumentError(backend.status().message());
  }
  return backend;
}

}  // namespace

absl::Status RunEvaluatorTask(const TfConfig& tf_config,
                              const GrpcSecurity& security,
                              const EvaluatorTaskOptions& options) {
  absl::StatusOr<HostPort> chief_address =
      tf_config.cluster.Address(MakeTask(JOB_CHIEF, 0));
  if (!chief_address.ok()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: cluster: the evaluator needs a \"chief\" task");
  }
  ChiefClient chief(CreatePstrainChannel(chief_address->ToString(), security),
                    tf_config.task, tf_config.cluster.ToString());
  absl::StatusOr<RegisterResponse> run = chief.Register(options.patience);
  if (!run.ok()) {
    // The chief's refusal is its own INVALID_ARGUMENT, not this task's.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot register with the chief at ",
                     chief_address->ToString(), ": ", run.status().message()));
  }
  const TrainingConfig& config = run->config();
  const bool binary_metrics =
      config.loss().kind() == LossConfig::BINARY_CROSSENTROPY;
  EvaluatorOptions evaluator_options;
  evaluator_options.model_dir = options.model_dir;
  evaluator_options.chief_patience = options.patience;
  // What an evaluation needs, by the run's data format.
  data::Dataset test;
  std::unique_ptr<worker::Backend> backend;
  std::unique_ptr<CheckpointEvaluation> evaluation;
  if (config.data_format() == "criteo") {
    absl::StatusOr<std::vector<std::string>> files = data::ListCriteoFiles(
        options.data_dir, data::CriteoPatternsOr(config.test_files(), "test"));
    if (!files.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_dir: ", files.status().message()));
    }
    absl::StatusOr<worker::ModelSpec> spec = worker::LoadRunModel(config);
    if (!spec.ok()) return absl::InvalidArgumentError(spec.status().message());
    CriteoEvaluationOptions criteo;
    criteo.files = *std::move(files);
    criteo.batch = options.eval_batch;
    criteo.bad_lines = config.skip_bad_lines() ? data::BadLines::kSkip
                                               : data::BadLines::kRefuse;
    // A growing table is evaluated on a mirror of the rows a batch names.
    PSTRAIN_ASSIGN_OR_RETURN(
        backend,
        CreateBackendOrRefuse(worker::WithLocalTables(*spec, criteo.batch),
                              config, options.threads));
    evaluation = NewCriteoCheckpointEvaluation(
        backend.get(), *std::move(spec), std::move(criteo), binary_metrics);
  } else {
    absl::StatusOr<data::Dataset> read =
        data::ReadDataDir(options.data_dir, data::Split::kTest);
    if (!read.ok()) return absl::InvalidArgumentError(read.status().message());
    test = *std::move(read);
    absl::StatusOr<worker::ModelSpec> spec =
        worker::ParseKerasModel(config.model_json(), config.seed());
    if (!spec.ok()) return absl::InvalidArgumentError(spec.status().message());
    if (absl::Status fit = worker::FitDatasetToModel(*spec, &test); !fit.ok()) {
      return absl::InvalidArgumentError(fit.message());
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        backend, CreateBackendOrRefuse(*spec, config, options.threads));
    evaluation = NewTestSetCheckpointEvaluation(
        backend.get(), &test, options.eval_batch, binary_metrics);
  }
  LogInfo(absl::StrCat("evaluator: registered in run ", run->run_id(),
                       "; evaluating the checkpoints of ", options.model_dir,
                       " at each epoch's end"));
  Evaluator evaluator(evaluator_options, &*run, &chief, evaluation.get());
  return evaluator.Run();
}

}  // namespace chief
}  // namespace pstrain
