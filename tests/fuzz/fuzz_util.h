// Helpers shared by the fuzz targets of tests/fuzz (see BUILD there):
// splitting one fuzz input into several parts, scratch files in a private
// temporary directory, and failing a target when the code breaks a promise
// its header makes (as opposed to crashing, which the fuzzer sees anyway).
//
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     pstrain::fuzz::FuzzReader in(data, size);
//     const uint8_t options = in.Byte();
//     const std::string path =
//         pstrain::fuzz::WriteTempFile("a.csv", in.Record());
//     absl::StatusOr<Dataset> d = ReadCsv(path, ...);
//     PSTRAIN_FUZZ_EXPECT(d.ok() || !d.status().message().empty(),
//                         "an error without a message");
//     return 0;
//   }
#ifndef PSTRAIN_TESTS_FUZZ_FUZZ_UTIL_H_
#define PSTRAIN_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace pstrain {
namespace fuzz {

// Reads a fuzz input as a sequence of parts. Every read succeeds: past the
// end, bytes read as 0 and records as empty, so any input is a valid
// sequence and the fuzzer never wastes effort on framing errors. Records end
// at a separator (kRecordSeparator) rather than carrying a length, so that
// the fuzzer's insertions and deletions inside one keep the rest in place.
class FuzzReader {
 public:
  FuzzReader(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data), size) {}

  bool empty() const { return data_.empty(); }

  // The next byte, 0 at the end.
  uint8_t Byte();
  // The bytes up to the next separator (which is skipped), or to the end.
  absl::string_view Record();
  // Everything not read yet.
  absl::string_view Rest();

 private:
  absl::string_view data_;
};

// Ends a record. Four bytes that valid seeds do not hold (0xff starts no
// protobuf field, nor any UTF-8 character); also in the fuzzers'
// dictionaries, so that the fuzzer splits and joins records.
inline constexpr absl::string_view kRecordSeparator("\xff" "SEP", 4);

// Parses `record` as `message`: protobuf's text format when `text`, else its
// binary form. The text form lets the fuzzer change a number's length (a
// huge size, a negative offset) without breaking the message around it.
bool ParseMessage(absl::string_view record, bool text,
                  google::protobuf::Message* message);

// Builds inputs that FuzzReader reads back (for seed corpora).
class FuzzWriter {
 public:
  FuzzWriter& Byte(uint8_t b);
  // `record` then the separator. REQUIRES: record holds no separator.
  FuzzWriter& Record(absl::string_view record);
  // `message` as a record, in text format or binary (see ParseMessage).
  FuzzWriter& Message(const google::protobuf::Message& message, bool text);
  FuzzWriter& Raw(absl::string_view bytes);
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// This process's scratch directory, created on first use: under
// $TEST_TMPDIR when run by `bazel test`, else a fresh /tmp/pstrain-fuzz.XXXXXX
// removed at exit. Targets write nowhere else.
const std::string& TempDir();

// Writes `bytes` to TempDir()/name (replacing it) and returns the path.
std::string WriteTempFile(const std::string& name, absl::string_view bytes);

// Whether $PSTRAIN_FUZZ_VERBOSE is set: targets then print what each
// operation returned, to check by hand that seeds reach what they aim at.
bool Verbose();

// Reports a broken property of the code under test and aborts, so that the
// fuzzer records the input: "fuzz property failed at file:line: what".
[[noreturn]] void PropertyFailed(const char* file, int line,
                                 absl::string_view what);

}  // namespace fuzz
}  // namespace pstrain

// Aborts the target (a finding) when `condition` is false; `what` is any
// expression absl::StrCat accepts, evaluated only on failure.
#define PSTRAIN_FUZZ_EXPECT(condition, ...)                             \
  do {                                                                  \
    if (!(condition)) {                                                 \
      ::pstrain::fuzz::PropertyFailed(                                  \
          __FILE__, __LINE__,                                           \
          ::absl::StrCat(#condition, ": ", __VA_ARGS__));               \
    }                                                                   \
  } while (0)

#endif  // PSTRAIN_TESTS_FUZZ_FUZZ_UTIL_H_
