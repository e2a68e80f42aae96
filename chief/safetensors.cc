#include "chief/safetensors.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

struct DtypeInfo {
  const char* name;
  int64_t size;
};

absl::StatusOr<DtypeInfo> SafetensorsDtype(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
      return DtypeInfo{"F32", 4};
    case DT_HALF:
      return DtypeInfo{"F16", 2};
    case DT_BFLOAT16:
      return DtypeInfo{"BF16", 2};
    case DT_DOUBLE:
      return DtypeInfo{"F64", 8};
    case DT_INT32:
      return DtypeInfo{"I32", 4};
    case DT_INT64:
      return DtypeInfo{"I64", 8};
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: no dtype for ", DataType_Name(dtype)));
  }
}

// `s` as a JSON string literal.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, "\\u00", c < 0x10 ? "0" : "",
                      absl::Hex(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// OK when nothing is at `path`, or a safetensors file (its first 8 bytes
// a header length the file holds, the header starting with '{'): an earlier
// export, which a new one may replace.
absl::Status CheckReplaceable(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("stat ", path));
  }
  const auto refuse = [&path](absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is ", what,
                     ", not a safetensors file: it is left as it is"));
  };
  if (S_ISDIR(st.st_mode)) return refuse("a directory");
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9];
  if (!in.read(reinterpret_cast<char*>(head), sizeof(head))) {
    return refuse("a file of another kind");
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | head[i];
  if (head[8] != '{' || header > static_cast<uint64_t>(st.st_size) - 8) {
    return refuse("a file of another kind");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SafetensorsBytes(
    absl::Span<const WholeVariable> tensors) {
  std::string header = "{";
  int64_t offset = 0;
  for (const WholeVariable& t : tensors) {
    PSTRAIN_ASSIGN_OR_RETURN(DtypeInfo dtype, SafetensorsDtype(t.dtype));
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    if (elements * dtype.size != static_cast<int64_t>(t.data.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: '", t.name, "' has ", t.data.size(), " bytes, not ",
          elements * dtype.size));
    }
    absl::StrAppend(&header, JsonString(t.name), ":{\"dtype\":\"", dtype.name,
                    "\",\"shape\":[", absl::StrJoin(t.shape, ","),
                    "],\"data_offsets\":[", offset, ",",
                    offset + static_cast<int64_t>(t.data.size()), "]},");
    offset += t.data.size();
  }
  absl::StrAppend(&header, "\"__metadata__\":{\"format\":\"pt\"}}");
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header.size() + offset);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  for (const WholeVariable& t : tensors) out += t.data;
  return out;
}

absl::Status WriteSafetensors(const std::string& path,
                              absl::Span<const WholeVariable> tensors) {
  PSTRAIN_RETURN_IF_ERROR(CheckReplaceable(path));
  PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, SafetensorsBytes(tensors));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file,
                           AtomicFile::Create(path));
  PSTRAIN_RETURN_IF_ERROR(file->Append(bytes.data(), bytes.size()).status());
  return file->Commit();
}

}  // namespace chief
}  // namespace pstrain
