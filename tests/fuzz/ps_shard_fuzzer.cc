// Fuzzes the decoding and checking of every ps request (ps/shard.h, the core
// the gRPC service hands each parsed request to). Input (FuzzReader):
//
//   mode byte      the fixture's run (fixtures.h: sync/async, optimizer,
//                  NaN policy), created on a fresh Shard of ps task 0
//   then up to 16 operations, each an op byte and its request(s), each a
//   record holding a message in binary or, when the op byte's high bit is
//   set, text format (fuzz_util.h: ParseMessage):
//     0 CreateVariables on the shard         5 PushSparse
//     1 CreateVariables on a fresh shard     6 Save (into the temp dir)
//       (kept when it succeeds)              7 Restore (from the temp dir)
//     2 PullDense                            8 GetShardStatus
//     3 PushDense: a count byte (bits 0-1:   9 SetWorkers
//       n - 1; bits 2-7: cut contents every
//       that many bytes, 0 whole), then
//       n <= 4 messages
//     4 PullSparse
//
// A record that does not parse is skipped, as gRPC would refuse it. Save and
// Restore get the scratch directory instead of theirs, so nothing is written
// elsewhere. Beyond not crashing, checks what shard.h promises: refusals carry
// a message and a code other than INTERNAL or UNKNOWN, and a refused dense
// push leaves every dense variable and version as it was.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "ps/dense_view_testing.h"
#include "ps/shard.h"
#include "tests/fuzz/fixtures.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace ps {
namespace {

constexpr int kMaxOperations = 16;
// A fresh shard's variables may hold at most this many floats each, and
// there may be at most 16: the chief sizes variables, and a request for more
// memory than the machine has is out of scope here.
constexpr int64_t kMaxFreshElements = 1 << 16;

void CheckRefusal(const absl::Status& status) {
  if (fuzz::Verbose()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  if (status.ok()) return;
  PSTRAIN_FUZZ_EXPECT(!status.message().empty(), status.ToString());
  PSTRAIN_FUZZ_EXPECT(status.code() != absl::StatusCode::kInternal &&
                          status.code() != absl::StatusCode::kUnknown,
                      status.ToString());
}

ShardOptions FixtureOptions() {
  ShardOptions options;
  options.ps_task = 0;
  options.default_step_timeout = absl::Milliseconds(1);
  options.on_abort = [](const absl::Status&) {};  // main() would exit.
  options.checkpoint_root = fuzz::TempDir();
  return options;
}

// Every dense value and every version, for checking that a refused request
// changed nothing.
std::string Snapshot(Shard* shard) {
  std::string out;
  PullDenseRequest pull;
  pull.mutable_header()->set_run_id(fuzz::kRunId);
  const absl::Status status = shard->PullDense(
      pull, [&out](const DenseVariable& v, const ValueView& value) {
        absl::StrAppend(&out, v.name(), "@", value.version, ":");
        out.append(value.data, value.size);
      });
  absl::StrAppend(&out, "|", status.ToString());
  GetShardStatusRequest get;
  get.mutable_header()->set_run_id(fuzz::kRunId);
  ShardStatus shard_status;
  if (shard->GetShardStatus(get, &shard_status).ok()) {
    // Sorted: a protobuf map's order is unspecified.
    const std::map<std::string, int64_t> versions(
        shard_status.variable_versions().begin(),
        shard_status.variable_versions().end());
    for (const auto& [name, version] : versions) {
      absl::StrAppend(&out, "|", name, "@", version);
    }
  }
  return out;
}

// Whether `request` may be tried on a fresh shard (see kMaxFreshElements);
// bounds its step timeout so that a sync pull cannot wait long.
bool PrepareFresh(CreateVariablesRequest* request) {
  if (request->variables_size() > 16) return false;
  for (const ShardVariable& v : request->variables()) {
    // Nonzero dimensions only: a growing table's rows count too.
    std::vector<int64_t> dims;
    for (int64_t d : v.def().shape().dims()) {
      if (d != 0) dims.push_back(d);
    }
    const absl::StatusOr<int64_t> n = NumElements(dims, sizeof(float));
    if (n.ok() && *n > kMaxFreshElements) return false;
  }
  UpdateConfig* update = request->mutable_update();
  if (update->step_timeout_ms() > 1) update->set_step_timeout_ms(1);
  return true;
}

class ShardFuzzer {
 public:
  explicit ShardFuzzer(uint8_t mode)
      : shard_(std::make_unique<Shard>(FixtureOptions())) {
    // Each input starts from no checkpoint: a crash must replay alone.
    std::error_code ignored;
    std::filesystem::remove_all(CheckpointDir(), ignored);
    CreateVariablesResponse response;
    const absl::Status created =
        shard_->CreateVariables(fuzz::ShardFixture(mode), &response);
    PSTRAIN_FUZZ_EXPECT(created.ok(), "the fixture: ", created.ToString());
  }

  void Run(fuzz::FuzzReader* in) {
    for (int i = 0; i < kMaxOperations && !in->empty(); ++i) {
      const uint8_t op_byte = in->Byte();
      text_ = (op_byte & 0x80) != 0;
      const int op = (op_byte & 0x7f) % 10;
      if (op == 3) {
        PushDense(in);
        continue;
      }
      const absl::string_view record = in->Record();
      switch (op) {
        case 0:
          Create(record, /*fresh=*/false);
          break;
        case 1:
          Create(record, /*fresh=*/true);
          break;
        case 2:
          PullDense(record);
          break;
        case 4:
          PullSparse(record);
          break;
        case 5:
          PushSparse(record);
          break;
        case 6:
          Save(record);
          break;
        case 7:
          Restore(record);
          break;
        case 8:
          GetStatus(record);
          break;
        case 9:
          SetWorkers(record);
          break;
      }
    }
  }

 private:
  void Create(absl::string_view record, bool fresh) {
    CreateVariablesRequest request;
    if (!Parse(record, &request)) return;
    CreateVariablesResponse response;
    if (!fresh) {
      CheckRefusal(shard_->CreateVariables(request, &response));
      return;
    }
    if (!PrepareFresh(&request)) return;
    auto shard = std::make_unique<Shard>(FixtureOptions());
    const absl::Status status = shard->CreateVariables(request, &response);
    CheckRefusal(status);
    if (status.ok()) shard_ = std::move(shard);
  }

  void PullDense(absl::string_view record) {
    PullDenseRequest request;
    if (!Parse(record, &request)) return;
    std::vector<char> copy;
    CheckRefusal(shard_->PullDense(
        request, [&copy](const DenseVariable& v, const ValueView& value) {
          PSTRAIN_FUZZ_EXPECT(value.size == v.num_bytes(), v.name(), ": ",
                              value.size, " bytes of ", v.num_bytes());
          copy.assign(value.data, value.data + value.size);
        }));
  }

  void PushDense(fuzz::FuzzReader* in) {
    const uint8_t count_byte = in->Byte();
    const int count = 1 + count_byte % 4;
    // Contents cut every `cut` bytes at odd addresses, as gRPC may deliver
    // them (0: whole).
    const size_t cut = count_byte / 4;
    std::vector<PushDenseRequest> messages(count);
    std::vector<std::string> storage(count);
    std::vector<PushDenseView> cut_views(count);
    std::vector<const PushDenseView*> views;
    for (int i = 0; i < count; ++i) {
      if (!Parse(in->Record(), &messages[i])) return;
      cut_views[i] = cut == 0 ? ViewOf(messages[i])
                              : CutContents(messages[i], cut, &storage[i]);
      views.push_back(&cut_views[i]);
    }
    const std::string before = Snapshot(shard_.get());
    const absl::StatusOr<PushDenseResponse> response =
        shard_->PushDense(views);
    CheckRefusal(response.status());
    if (!response.ok()) {
      const std::string after = Snapshot(shard_.get());
      PSTRAIN_FUZZ_EXPECT(after == before, "a refused push changed the shard: ",
                          response.status().ToString(), "\nbefore: ",
                          absl::CHexEscape(before), "\nafter:  ",
                          absl::CHexEscape(after));
    }
  }

  void PullSparse(absl::string_view record) {
    PullSparseRequest request;
    if (!Parse(record, &request)) return;
    PullSparseResponse response;
    const absl::Status status = shard_->PullSparse(request, &response);
    CheckRefusal(status);
    if (!status.ok()) return;
    const TensorProto& values = response.values();
    PSTRAIN_FUZZ_EXPECT(
        values.shape().dims_size() == 2 &&
            values.shape().dims(0) == request.ids_size() &&
            static_cast<int64_t>(values.content().size()) ==
                values.shape().dims(0) * values.shape().dims(1) * 4,
        values.ShortDebugString());
  }

  void PushSparse(absl::string_view record) {
    PushSparseRequest request;
    if (!Parse(record, &request)) return;
    PushSparseResponse response;
    CheckRefusal(shard_->PushSparse(request, &response));
  }

  void Save(absl::string_view record) {
    SaveRequest request;
    if (!Parse(record, &request)) return;
    if (!request.directory().empty()) request.set_directory("ckpt");
    SaveResponse response;
    CheckRefusal(shard_->Save(request, &response));
  }

  void Restore(absl::string_view record) {
    RestoreRequest request;
    if (!Parse(record, &request)) return;
    if (!request.directory().empty()) request.set_directory("ckpt");
    RestoreResponse response;
    CheckRefusal(shard_->Restore(request, &response));
  }

  void GetStatus(absl::string_view record) {
    GetShardStatusRequest request;
    if (!Parse(record, &request)) return;
    ShardStatus status;
    CheckRefusal(shard_->GetShardStatus(request, &status));
  }

  void SetWorkers(absl::string_view record) {
    SetWorkersRequest request;
    if (!Parse(record, &request)) return;
    SetWorkersResponse response;
    CheckRefusal(shard_->SetWorkers(request, &response));
  }

  bool Parse(absl::string_view record, google::protobuf::Message* message) {
    return fuzz::ParseMessage(record, text_, message);
  }

  static const std::string& CheckpointDir() {
    static const std::string* const dir =
        new std::string(fuzz::TempDir() + "/ckpt");
    return *dir;
  }

  std::unique_ptr<Shard> shard_;
  bool text_ = false;  // The current op's records are in text format.
};

}  // namespace
}  // namespace ps
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::fuzz::FuzzReader in(data, size);
  pstrain::ps::ShardFuzzer fuzzer(in.Byte());
  fuzzer.Run(&in);
  return 0;
}
