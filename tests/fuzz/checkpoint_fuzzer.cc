// Fuzzes the chief's checkpoint reading (chief/checkpoint_reader.h and the
// directory names of chief/checkpoint_layout.h): a damaged checkpoint must
// be refused with a status, never crash the chief. Input (FuzzReader):
//   a byte: bit 0 set when the index comes in text format
//   a record: a directory name for ParseCheckpointName
//   a record: index.pb, a CheckpointIndex: its bytes, or in text format
//             (then written as its binary serialization, if it parses)
//   the rest: the bytes of the data file ps-0.data
// written as <temp>/model/ckpt-7/. Checks the codes the header promises, and
// that every variable read has the bytes its shape says.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpoint_reader.h"
#include "common/tensor.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace chief {
namespace {

using absl::StatusCode;

void ExpectCode(const absl::Status& status,
                std::initializer_list<StatusCode> codes, absl::string_view what) {
  if (fuzz::Verbose()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(what.size()),
                 what.data(), status.ToString().c_str());
  }
  if (status.ok()) return;
  PSTRAIN_FUZZ_EXPECT(!status.message().empty(), what, ": no message");
  for (StatusCode code : codes) {
    if (status.code() == code) return;
  }
  PSTRAIN_FUZZ_EXPECT(false, what, ": ", status.ToString());
}

void CheckVariables(const std::vector<WholeVariable>& variables) {
  for (const WholeVariable& v : variables) {
    const absl::StatusOr<int64_t> n =
        NumElements(v.shape, DataTypeSize(v.dtype));
    PSTRAIN_FUZZ_EXPECT(n.ok(), v.name, " ", ShapeString(v.shape));
    PSTRAIN_FUZZ_EXPECT(
        static_cast<int64_t>(v.data.size()) ==
            *n * static_cast<int64_t>(DataTypeSize(v.dtype)),
        v.name, " ", ShapeString(v.shape), " has ", v.data.size(), " bytes");
  }
}

}  // namespace
}  // namespace chief
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain::chief;  // NOLINT: a fuzz entry point.
  using absl::StatusCode;
  namespace fs = std::filesystem;
  pstrain::fuzz::FuzzReader in(data, size);
  const bool text_index = in.Byte() & 1;

  const absl::string_view name = in.Record();
  int64_t step = -1;
  if (ParseCheckpointName(std::string(name), &step)) {
    PSTRAIN_FUZZ_EXPECT(step >= 0, name, " -> ", step);
  }

  static const std::string* const model_dir =
      new std::string(pstrain::fuzz::TempDir() + "/model");
  const std::string dir = CheckpointDir(*model_dir, 7);
  std::error_code error;
  fs::create_directories(dir, error);
  std::string index_bytes(in.Record());
  if (text_index) {
    pstrain::CheckpointIndex parsed;
    if (!pstrain::fuzz::ParseMessage(index_bytes, true, &parsed)) return 0;
    index_bytes = parsed.SerializeAsString();
  }
  pstrain::fuzz::WriteTempFile("model/ckpt-7/index.pb", index_bytes);
  pstrain::fuzz::WriteTempFile("model/ckpt-7/ps-0.data", in.Rest());

  const absl::StatusOr<pstrain::CheckpointIndex> index =
      ReadCheckpointIndex(dir);
  ExpectCode(index.status(),
             {StatusCode::kDataLoss, StatusCode::kFailedPrecondition},
             "ReadCheckpointIndex");
  if (index.ok()) {
    ToSavedSlices(*index);
    ExpectCode(VerifyCheckpointData(dir, *index), {StatusCode::kDataLoss},
               "VerifyCheckpointData");
    for (bool with_slots : {false, true}) {
      const absl::StatusOr<std::vector<WholeVariable>> variables =
          ReadVariables(dir, *index, with_slots);
      ExpectCode(variables.status(),
                 {StatusCode::kDataLoss, StatusCode::kUnimplemented},
                 "ReadVariables");
      if (variables.ok()) CheckVariables(*variables);
    }
  }
  const absl::StatusOr<LoadedCheckpoint> latest =
      FindLatestGoodCheckpoint(*model_dir, [](absl::string_view) {});
  ExpectCode(latest.status(), {StatusCode::kDataLoss}, "FindLatestGood");
  return 0;
}
