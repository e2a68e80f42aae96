#include "chief/run_log.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

double Mean(double sum, int64_t count) {
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunLog>> RunLog::Create(RunLogOptions options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> train,
                           EventWriter::Create(options.model_dir + "/train"));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<EventWriter> validation,
      EventWriter::Create(options.model_dir + "/validation"));
  if (!options.model_summary.empty()) {
    PSTRAIN_RETURN_IF_ERROR(
        train->WriteText(0, "model_summary", options.model_summary));
  }
  History history;
  if (options.keep_history_before > 0) {
    const std::string path = options.model_dir + "/history.csv";
    std::ifstream file(path, std::ios::binary);
    if (file) {
      std::stringstream csv;
      csv << file.rdbuf();
      absl::StatusOr<History> kept =
          History::FromCsv(csv.str(), options.keep_history_before);
      if (!kept.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": ", kept.status().message(),
                         " (move it away to start a new history)"));
      }
      history = std::move(*kept);
    }
  }
  std::unique_ptr<RunLog> log(
      new RunLog(std::move(options), std::move(train), std::move(validation)));
  log->history_ = std::move(history);
  return log;
}

absl::Status RunLog::LogProgress(int64_t step, const Progress& progress,
                                 double seconds) {
  epoch_seconds_ += seconds;
  if (progress.examples == 0) return absl::OkStatus();  // nothing to show
  return train_->WriteScalars(
      step, {{"batch_loss", Mean(progress.loss_sum, progress.examples)},
             {"batch_accuracy", Mean(progress.correct, progress.examples)},
             {"batch_examples_per_second",
              progress.examples / std::max(seconds, 1e-9)}});
}

absl::Status RunLog::EndEpoch(int64_t epoch, const Progress& trained) {
  const double loss = Mean(trained.loss_sum, trained.examples);
  const double accuracy = Mean(trained.correct, trained.examples);
  const double rate = trained.examples / std::max(epoch_seconds_, 1e-9);
  history_.Set(epoch, "loss", loss);
  history_.Set(epoch, "accuracy", accuracy);
  history_.Set(epoch, "examples_per_sec", rate);
  history_.Set(epoch, "seconds", epoch_seconds_);
  epoch_seconds_ = 0;
  PSTRAIN_RETURN_IF_ERROR(train_->WriteScalars(
      epoch, {{"epoch_loss", loss},
              {"epoch_accuracy", accuracy},
              {"epoch_examples_per_second", rate},
              {"epoch_learning_rate", options_.learning_rate}}));
  return WriteHistoryCsv();
}

absl::Status RunLog::LogEvaluation(int64_t epoch, int64_t step,
                                   const Evaluation& eval) {
  history_.Set(epoch, "val_loss", eval.loss);
  history_.Set(epoch, "val_accuracy", eval.accuracy);
  std::vector<std::pair<std::string, double>> per_epoch = {
      {"epoch_loss", eval.loss}, {"epoch_accuracy", eval.accuracy}};
  if (eval.auc.has_value()) {
    history_.Set(epoch, "val_auc", *eval.auc);
    per_epoch.emplace_back("epoch_auc", *eval.auc);
  }
  if (eval.log_loss.has_value()) {
    history_.Set(epoch, "val_logloss", *eval.log_loss);
    per_epoch.emplace_back("epoch_logloss", *eval.log_loss);
  }
  if (eval.calibration.has_value() && std::isfinite(*eval.calibration)) {
    history_.Set(epoch, "val_calibration", *eval.calibration);
    per_epoch.emplace_back("epoch_calibration", *eval.calibration);
  }
  PSTRAIN_RETURN_IF_ERROR(validation_->WriteScalars(epoch, per_epoch));
  PSTRAIN_RETURN_IF_ERROR(validation_->WriteScalars(
      step, {{"evaluation_loss_vs_iterations", eval.loss},
             {"evaluation_accuracy_vs_iterations", eval.accuracy}}));
  return WriteHistoryCsv();
}

absl::Status RunLog::WriteHistoryCsv() const {
  return WriteFileAtomically(options_.model_dir + "/history.csv",
                             history_.ToCsv());
}

}  // namespace chief
}  // namespace pstrain
