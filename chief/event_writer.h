// Writes a TensorBoard event file: the chief's scalars and text for one
// TensorBoard "run" (a directory, e.g. model_dir/train), as TensorFlow 2's
// summary writer and Keras's TensorBoard callback write them.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> train,
//                            EventWriter::Create(model_dir + "/train"));
//   PSTRAIN_RETURN_IF_ERROR(
//       train->WriteScalars(/*step=*/100, {{"batch_loss", 0.52}}));
//   PSTRAIN_RETURN_IF_ERROR(train->WriteText(0, "model_summary", markdown));
//
// Create makes the directory and a new file in it named
// events.out.tfevents.<seconds>.<host>.<pid>.v2 (.<n>.v2 for the n-th
// other one of this process in that second; TensorBoard reads every file of
// that prefix in a run's directory), whose first record says
// "brain.Event:2". Every later record is an Event (proto/tensorboard.proto)
// holding a Summary: a scalar is a rank-0 DT_FLOAT tensor with plugin
// "scalars" and data class SCALAR, text a rank-0 DT_STRING tensor with plugin
// "text" (TensorBoard renders it as Markdown). Records are framed as TFRecords
// (chief/tfrecord_writer.h) and reach the file as they are written, so
// TensorBoard shows a run while it trains. Not thread-safe: one caller at a
// time.
#ifndef PSTRAIN_CHIEF_EVENT_WRITER_H_
#define PSTRAIN_CHIEF_EVENT_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/tfrecord_writer.h"
#include "proto/tensorboard.pb.h"

namespace pstrain {
namespace chief {

// The version string of the first record of every event file.
inline constexpr char kEventFileVersion[] = "brain.Event:2";

class EventWriter {
 public:
  // Creates `dir` if need be and a new event file in it.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(
      const std::string& dir);

  // One event at `step` holding every (tag, value), each a float32 scalar.
  absl::Status WriteScalars(
      int64_t step, const std::vector<std::pair<std::string, double>>& values);

  // `text` (Markdown) under `tag` at `step`.
  absl::Status WriteText(int64_t step, const std::string& tag,
                         const std::string& text);

  const std::string& path() const { return file_->path(); }

 private:
  explicit EventWriter(std::unique_ptr<TfRecordWriter> file)
      : file_(std::move(file)) {}

  // Writes `event`, stamped with the current time.
  absl::Status Write(tensorboard::Event& event);

  std::unique_ptr<TfRecordWriter> file_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVENT_WRITER_H_
