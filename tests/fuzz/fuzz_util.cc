#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"

namespace pstrain {
namespace fuzz {
namespace {

// Protobuf logs every string field it refuses for bad UTF-8; fuzz inputs
// make thousands of those lines.
const bool kProtobufQuiet = (google::protobuf::SetLogHandler(nullptr), true);

// TempDir: made by the constructor, removed by the destructor unless Bazel
// owns it (Bazel cleans TEST_TMPDIR; elsewhere nothing would).
class ScratchDir {
 public:
  ScratchDir() {
    const char* test_tmpdir = std::getenv("TEST_TMPDIR");
    const bool under_bazel = test_tmpdir != nullptr && *test_tmpdir != '\0';
    path_ = under_bazel ? absl::StrCat(test_tmpdir, "/files.XXXXXX")
                        : std::string("/tmp/pstrain-fuzz.XXXXXX");
    if (mkdtemp(path_.data()) == nullptr) {
      std::perror(("mkdtemp " + path_).c_str());
      std::abort();
    }
    remove_at_exit_ = !under_bazel;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (!remove_at_exit_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_at_exit_ = false;
};

}  // namespace

uint8_t FuzzReader::Byte() {
  if (data_.empty()) return 0;
  const uint8_t b = static_cast<uint8_t>(data_[0]);
  data_.remove_prefix(1);
  return b;
}

absl::string_view FuzzReader::Record() {
  const size_t end = data_.find(kRecordSeparator);
  if (end == absl::string_view::npos) return Rest();
  const absl::string_view record = data_.substr(0, end);
  data_.remove_prefix(end + kRecordSeparator.size());
  return record;
}

absl::string_view FuzzReader::Rest() {
  const absl::string_view rest = data_;
  data_ = absl::string_view();
  return rest;
}

bool ParseMessage(absl::string_view record, bool text,
                  google::protobuf::Message* message) {
  if (text) {
    return google::protobuf::TextFormat::ParseFromString(std::string(record),
                                                        message);
  }
  return message->ParseFromArray(record.data(),
                                 static_cast<int>(record.size()));
}

FuzzWriter& FuzzWriter::Byte(uint8_t b) {
  bytes_.push_back(static_cast<char>(b));
  return *this;
}

FuzzWriter& FuzzWriter::Record(absl::string_view record) {
  if (absl::StrContains(record, kRecordSeparator)) {
    std::fprintf(stderr, "FuzzWriter: a record holds the separator\n");
    std::abort();
  }
  bytes_.append(record.data(), record.size());
  bytes_.append(kRecordSeparator.data(), kRecordSeparator.size());
  return *this;
}

FuzzWriter& FuzzWriter::Message(const google::protobuf::Message& message,
                                bool text) {
  std::string bytes;
  if (text) {
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(message, &bytes);
  } else {
    bytes = message.SerializeAsString();
  }
  return Record(bytes);
}

FuzzWriter& FuzzWriter::Raw(absl::string_view bytes) {
  bytes_.append(bytes.data(), bytes.size());
  return *this;
}

const std::string& TempDir() {
  static const ScratchDir dir;  // Destroyed at exit.
  return dir.path();
}

std::string WriteTempFile(const std::string& name, absl::string_view bytes) {
  const std::string path = absl::StrCat(TempDir(), "/", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

bool Verbose() {
  static const bool verbose = std::getenv("PSTRAIN_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void PropertyFailed(const char* file, int line, absl::string_view what) {
  std::fprintf(stderr, "fuzz property failed at %s:%d: %.*s\n", file, line,
               static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace fuzz
}  // namespace pstrain
