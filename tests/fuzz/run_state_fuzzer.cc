// Fuzzes the decoding and checking of every chief request (chief/run_state.h,
// the core the chief's gRPC service hands each parsed request to), mixed
// with what the chief's driver does meanwhile. The fixture is a RunState for
// the cluster of fixtures.h (chief, 2 ps, 3 workers, an evaluator), 10 steps
// an epoch, 100 in all. Input (FuzzReader): up to 24 operations, each an op
// byte and a record: a message in binary or, when the op byte's high bit is
// set, text format (fuzz_util.h: ParseMessage), or the driver's arguments:
//   0 Register                 4 TrainingFinished
//   1 Heartbeat                5 SetPhase (the record's first byte)
//   2 GetTrainingState         6 SetPauseAtStep (the record's first 8 bytes,
//   3 ReportMetrics              little-endian), or PauseAtNextStep when the
//                                record is shorter
//   7 the driver's queries: WaitForTasks, WaitForStep (the record's first
//     byte), both with a past deadline, AllWorkersFinished, TakeProgress
// A record that does not parse is skipped, as gRPC would refuse it. Beyond
// not crashing, checks what run_state.h promises: refusals are
// FAILED_PRECONDITION, INVALID_ARGUMENT or NOT_FOUND with a message, and
// the progress figures stay finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chief/run_state.h"
#include "common/tf_config.h"
#include "tests/fuzz/fixtures.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace chief {
namespace {

constexpr int kMaxOperations = 24;

void CheckRefusal(const absl::Status& status) {
  if (fuzz::Verbose()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  if (status.ok()) return;
  PSTRAIN_FUZZ_EXPECT(!status.message().empty(), status.ToString());
  PSTRAIN_FUZZ_EXPECT(
      status.code() == absl::StatusCode::kFailedPrecondition ||
          status.code() == absl::StatusCode::kInvalidArgument ||
          status.code() == absl::StatusCode::kNotFound,
      status.ToString());
}

template <typename Request, typename Handler>
void Handle(absl::string_view record, bool text, Handler handler) {
  Request request;
  if (!fuzz::ParseMessage(record, text, &request)) return;
  CheckRefusal(handler(request).status());
}

const ClusterSpec& Cluster() {
  static const ClusterSpec* const cluster = [] {
    absl::StatusOr<TfConfig> config = ParseTfConfig(fuzz::kChiefTfConfig);
    PSTRAIN_FUZZ_EXPECT(config.ok(), config.status().ToString());
    return new ClusterSpec(config->cluster);
  }();
  return *cluster;
}

void Run(fuzz::FuzzReader* in) {
  RunState state(fuzz::kRunId, fuzz::ChiefFixtureConfig(), Placement(),
                 Cluster(), /*steps_per_epoch=*/10, /*total_steps=*/100);
  const absl::Time past = absl::InfinitePast();
  for (int i = 0; i < kMaxOperations && !in->empty(); ++i) {
    const uint8_t op_byte = in->Byte();
    const bool text = (op_byte & 0x80) != 0;
    const absl::string_view record = in->Record();
    const uint8_t first = record.empty() ? 0 : record[0];
    switch ((op_byte & 0x7f) % 8) {
      case 0:
        Handle<RegisterRequest>(record, text, [&](const auto& r) {
          return state.Register(r);
        });
        break;
      case 1:
        Handle<HeartbeatRequest>(record, text, [&](const auto& r) {
          return state.Heartbeat(r);
        });
        break;
      case 2:
        Handle<GetTrainingStateRequest>(record, text, [&](const auto& r) {
          return state.GetTrainingState(r);
        });
        break;
      case 3:
        Handle<ReportMetricsRequest>(record, text, [&](const auto& r) {
          return state.ReportMetrics(r);
        });
        break;
      case 4:
        Handle<TrainingFinishedRequest>(record, text, [&](const auto& r) {
          return state.TrainingFinished(r);
        });
        break;
      case 5:
        state.SetPhase(static_cast<RunPhase>(first % (RunPhase_MAX + 1)));
        break;
      case 6:
        if (record.size() >= 8) {
          int64_t step = 0;
          std::memcpy(&step, record.data(), 8);
          state.SetPauseAtStep(step);
        } else {
          state.PauseAtNextStep();
        }
        break;
      case 7: {
        state.WaitForTasks(past);
        state.WaitForStep(first, past);
        state.AllWorkersFinished();
        const Progress progress = state.TakeProgress();
        PSTRAIN_FUZZ_EXPECT(progress.examples >= 0, progress.examples);
        PSTRAIN_FUZZ_EXPECT(
            std::isfinite(progress.busy_seconds) && progress.busy_seconds >= 0,
            progress.busy_seconds);
        break;
      }
    }
  }
}

}  // namespace
}  // namespace chief
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::fuzz::FuzzReader in(data, size);
  pstrain::chief::Run(&in);
  return 0;
}
