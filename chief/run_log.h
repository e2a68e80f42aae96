// What a run leaves to read, during and after it, in model_dir as Keras's
// TensorBoard and CSVLogger callbacks lay it out:
//
//   model_dir/train/events.out.tfevents.*       training, for TensorBoard
//   model_dir/validation/events.out.tfevents.*  evaluation, for TensorBoard
//   model_dir/history.csv                       a row per epoch
//
// and the History that summary.json carries. The chief's driver feeds it
// what it prints:
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RunLog> log,
//                            RunLog::Create(options));
//   log->LogProgress(step, progress, seconds);  // at every progress line
//   log->EndEpoch(epoch, epoch_progress);       // at an epoch's end
//   log->LogEvaluation(epoch, step, eval);      // the evaluation of its end
//
// Scalars (float32) in train/: batch_loss, batch_accuracy,
// batch_examples_per_second at each progress line (global step; the means
// over the steps since the previous line, as the line prints them, where
// Keras logs the epoch's running means), and epoch_loss, epoch_accuracy,
// epoch_examples_per_second, epoch_learning_rate at each epoch's end (step:
// the epoch, from 0; the means over the epoch's reports, as Keras's); the model
// summary as text ("model_summary", step 0). In validation/: epoch_loss,
// epoch_accuracy (and epoch_auc, epoch_logloss, epoch_calibration for binary
// cross-entropy) at the epoch, and
// evaluation_loss_vs_iterations, evaluation_accuracy_vs_iterations at the
// global step, as Keras names them. History columns: loss, accuracy,
// examples_per_sec, seconds (the epoch's training time: the sum of its progress
// intervals), val_loss, val_accuracy (val_auc, val_logloss,
// val_calibration); history.csv is rewritten whole,
// atomically, at every epoch's end and every evaluation (an evaluator task's
// may come after the epoch's row). An epoch trained again after a recovery
// replaces its row; a restarted chief keeps the rows of the epochs its
// checkpoint has finished. Not thread-safe: the driver's thread alone calls it.
#ifndef PSTRAIN_CHIEF_RUN_LOG_H_
#define PSTRAIN_CHIEF_RUN_LOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chief/evaluation.h"
#include "chief/event_writer.h"
#include "chief/history.h"
#include "chief/run_state.h"

namespace pstrain {
namespace chief {

struct RunLogOptions {
  std::string model_dir;
  // The optimizer's (constant) learning rate.
  double learning_rate = 0;
  // The model as Markdown (chief/model_summary.h); logged when not empty.
  std::string model_summary;
  // A chief resuming a run from a checkpoint: the epochs before this one
  // (those the checkpoint has finished) are read back from
  // model_dir/history.csv, if there is one; 0: a new history.
  int64_t keep_history_before = 0;
};

class RunLog {
 public:
  // Creates model_dir/train and model_dir/validation with an event file in
  // each, and logs the model summary. A history.csv to keep that does not
  // read back is an error naming it.
  static absl::StatusOr<std::unique_ptr<RunLog>> Create(RunLogOptions options);

  // Training from the previous call to global step `step`: `progress`
  // (summed over the workers' reports) over `seconds` of wall time.
  absl::Status LogProgress(int64_t step, const Progress& progress,
                           double seconds);

  // Epoch `epoch` (from 0) ended, with `trained` the figures of its
  // reports (RunState::TakeEpochProgress): their means go to train/ and the
  // history, with its examples over the seconds of the progress lines since
  // the previous EndEpoch.
  absl::Status EndEpoch(int64_t epoch, const Progress& trained);

  // The test-set evaluation of the weights at the end of epoch `epoch`
  // (from 0), global step `step`.
  absl::Status LogEvaluation(int64_t epoch, int64_t step,
                             const Evaluation& eval);

  const History& history() const { return history_; }

 private:
  RunLog(RunLogOptions options, std::unique_ptr<EventWriter> train,
         std::unique_ptr<EventWriter> validation)
      : options_(std::move(options)),
        train_(std::move(train)),
        validation_(std::move(validation)) {}

  absl::Status WriteHistoryCsv() const;

  const RunLogOptions options_;
  std::unique_ptr<EventWriter> train_;
  std::unique_ptr<EventWriter> validation_;
  History history_;
  // Wall time of the epoch under way, so far.
  double epoch_seconds_ = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RUN_LOG_H_
