#include "chief/evaluator_task.h"

#include "absl/strings/str_cat.h"
#include "chief/chief_client.h"
#include "chief/evaluator.h"
#include "common/grpc_options.h"
#include "common/process.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/loss_config.h"
#include "data/data_dir.h"
#include "data/model_input.h"
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

absl::Status RunEvaluatorTask(const TfConfig& tf_config,
                              const GrpcSecurity& security,
                              const EvaluatorTaskOptions& options) {
  absl::StatusOr<HostPort> chief_address =
      tf_config.cluster.Address(MakeTask(JOB_CHIEF, 0));
  if (!chief_address.ok()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: cluster: the evaluator needs a \"chief\" task");
  }
  absl::StatusOr<data::Dataset> test =
      data::ReadDataDir(options.data_dir, data::Split::kTest);
  if (!test.ok()) return absl::InvalidArgumentError(test.status().message());
  ChiefClient chief(CreatePstrainChannel(chief_address->ToString(), security),
                    tf_config.task, tf_config.cluster.ToString());
  absl::StatusOr<RegisterResponse> run = chief.Register(options.patience);
  if (!run.ok()) {
    // The chief's refusal is its own INVALID_ARGUMENT, not this task's.
    return absl::FailedPreconditionError(absl::StrCat("cannot register with the chief at ",
                     chief_address->ToString(), ": ", run.status().message()));
  }
  absl::StatusOr<worker::ModelSpec> spec =
      worker::ParseKerasModel(run->config().model_json(), run->config().seed());
  if (!spec.ok()) return absl::InvalidArgumentError(spec.status().message());
  if (absl::Status fit = worker::FitDatasetToModel(*spec, &*test); !fit.ok()) {
    return absl::InvalidArgumentError(fit.message());
  }
  absl::StatusOr<std::unique_ptr<worker::Backend>> backend =
      CreateEvaluationBackend(*spec, run->config(), options.threads);
  if (!backend.ok()) {
    return absl::InvalidArgumentError(backend.status().message());
  }
  LogInfo(absl::StrCat("evaluator: registered in run ", run->run_id(),
                       "; evaluating the checkpoints of ", options.model_dir,
                       " at each epoch's end"));
  EvaluatorOptions evaluator_options;
  evaluator_options.model_dir = options.model_dir;
  evaluator_options.chief_patience = options.patience;
  Evaluator evaluator(evaluator_options, &*run, &chief, backend->get(),
                      &*test);
  return evaluator.Run();
}

}  // namespace chief
}  // namespace pstrain
