// Fuzzes the TF_CONFIG parser (common/tf_config.h): the input is TF_CONFIG
// text. Beyond not crashing, checks what the header promises: a failure is
// INVALID_ARGUMENT with one line starting "TF_CONFIG: "; a success names a
// task of the cluster (or an evaluator) and the "grpc" layer or none; and
// ReadTfConfig accepts exactly the parsed configs of its role.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tf_config.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace {

void CheckError(const absl::Status& status) {
  PSTRAIN_FUZZ_EXPECT(status.code() == absl::StatusCode::kInvalidArgument,
                      status.ToString());
  PSTRAIN_FUZZ_EXPECT(absl::StartsWith(status.message(), "TF_CONFIG: "),
                      status.message());
  PSTRAIN_FUZZ_EXPECT(!absl::StrContains(status.message(), '\n'),
                      status.message());
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;  // NOLINT: a fuzz entry point.
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<TfConfig> config = ParseTfConfig(text);
  if (!config.ok()) {
    CheckError(config.status());
  } else {
    const TaskRef& task = config->task;
    PSTRAIN_FUZZ_EXPECT(config->cluster.Address(task).ok() ||
                            task.job() == JOB_EVALUATOR,
                        TaskName(task), " not in ",
                        config->cluster.ToString());
    PSTRAIN_FUZZ_EXPECT(
        config->rpc_layer.empty() || config->rpc_layer == "grpc",
        config->rpc_layer);
    PSTRAIN_FUZZ_EXPECT(task.index() >= 0, task.index());
  }
  // "@path" would read a file: only literal text here.
  if (text.empty() || text[0] == '@') return 0;
  for (JobType role : {JOB_CHIEF, JOB_WORKER, JOB_PS, JOB_EVALUATOR}) {
    const absl::StatusOr<TfConfig> read = ReadTfConfig(text, nullptr, role);
    if (!read.ok()) {
      CheckError(read.status());
      PSTRAIN_FUZZ_EXPECT(!config.ok() || config->task.job() != role,
                          read.status().message());
    } else {
      PSTRAIN_FUZZ_EXPECT(config.ok() && config->task.job() == role,
                          "ReadTfConfig accepted what ParseTfConfig refused");
    }
  }
  return 0;
}
