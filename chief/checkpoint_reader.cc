#include "chief/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chief/checkpoint_layout.h"
#include "common/crc32c.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

absl::StatusOr<int64_t> ElementSize(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
    case DT_INT32:
      return 4;
    case DT_HALF:
    case DT_BFLOAT16:
      return 2;
    case DT_DOUBLE:
    case DT_INT64:
      return 8;
    default:
      return absl::UnimplementedError(
          absl::StrCat("dtype ", DataType_Name(dtype), " in a checkpoint"));
  }
}

// Whether `length` bytes are `rows` rows of `row_bytes` each, without
// overflowing on the damaged values of an index.
bool HoldsRows(int64_t length, int64_t rows, int64_t row_bytes) {
  if (rows < 0 || length < 0) return false;
  if (row_bytes == 0) return length == 0;
  return length % row_bytes == 0 && length / row_bytes == rows;
}

// Whether every dimension of `shape` is >= 0 and the product of the nonzero
// ones, times `element_size`, is at most 2^62: then no product of its
// dimensions (a row's bytes, the whole's) overflows.
bool ShapeFits(const std::vector<int64_t>& shape, int64_t element_size) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t bytes = element_size;
  for (const int64_t dim : shape) {
    if (dim < 0) return false;
    if (dim == 0) continue;
    if (bytes > kLimit / dim) return false;
    bytes *= dim;
  }
  return true;
}

// The data files of one checkpoint, opened once each.
class RegionReader {
 public:
  explicit RegionReader(std::string dir) : dir_(std::move(dir)) {}

  // The bytes of `region`, checked against its CRC32C; errors name `what`.
  absl::StatusOr<std::string> Read(const FileRegion& region,
                                   const std::string& what) {
    const std::string path = absl::StrCat(dir_, "/", region.file());
    if (region.file().empty() || region.file().find('/') != std::string::npos ||
        region.offset() < 0 || region.length() < 0) {
      return absl::DataLossError(absl::StrCat(
          what, ": bad file region '", region.file(), "' at ", region.offset()));
    }
    std::unique_ptr<std::ifstream>& file = files_[region.file()];
    if (file == nullptr) {
      file = std::make_unique<std::ifstream>(path, std::ios::binary);
    }
    if (!file->is_open()) {
      return absl::DataLossError(absl::StrCat(what, ": cannot open ", path));
    }
    // Against the file's size before allocating: a damaged index may give
    // any length.
    file->clear();
    file->seekg(0, std::ios::end);
    const int64_t size = file->tellg();
    if (!*file || region.offset() > size ||
        region.length() > size - region.offset()) {
      return absl::DataLossError(absl::StrCat(
          what, ": ", path, " is shorter than ", region.offset(), " + ",
          region.length(), " bytes"));
    }
    std::string bytes(region.length(), '\0');
    file->seekg(region.offset());
    file->read(bytes.data(), region.length());
    if (!*file) {
      return absl::DataLossError(absl::StrCat(
          what, ": ", path, " is shorter than ", region.offset(), " + ",
          region.length(), " bytes"));
    }
    if (Crc32c(bytes.data(), bytes.size()) != region.crc32c()) {
      return absl::DataLossError(absl::StrCat(
          what, ": CRC32C mismatch in ", path, " at offset ", region.offset(),
          " (", region.length(), " bytes)"));
    }
    return bytes;
  }

 private:
  const std::string dir_;
  std::map<std::string, std::unique_ptr<std::ifstream>> files_;
};

// An embedding table that grows on first touch: its stored rows, in id
// order, into *table ([rows, width...]) and their ids into *ids
// ("<name>/ids", int64 [rows]).
absl::Status ReadGrowingTable(RegionReader* reader, const CheckpointVariable& v,
                              int64_t row_bytes, WholeVariable* table,
                              WholeVariable* ids) {
  std::vector<std::pair<int64_t, std::string>> rows;
  for (const CheckpointSlice& s : v.slices()) {
    if (!HoldsRows(s.ids().length(), s.num_rows(), 8) ||
        !HoldsRows(s.values().length(), s.num_rows(), row_bytes)) {
      return absl::DataLossError(absl::StrCat(
          "'", v.name(), "': a slice of ", s.num_rows(), " rows has ",
          s.ids().length(), " bytes of ids and ", s.values().length(),
          " of values"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::string id_bytes,
                             reader->Read(s.ids(), v.name() + " ids"));
    PSTRAIN_ASSIGN_OR_RETURN(std::string values,
                             reader->Read(s.values(), v.name()));
    for (int64_t r = 0; r < s.num_rows(); ++r) {
      int64_t id = 0;
      std::memcpy(&id, id_bytes.data() + r * 8, 8);
      rows.emplace_back(id, values.substr(r * row_bytes, row_bytes));
    }
  }
  std::sort(rows.begin(), rows.end());
  table->shape[0] = rows.size();
  ids->name = v.name() + "/ids";
  ids->dtype = DT_INT64;
  ids->shape = {static_cast<int64_t>(rows.size())};
  for (const auto& [id, row] : rows) {
    ids->data.append(reinterpret_cast<const char*>(&id), 8);
    table->data += row;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kCheckpointIndexFile);
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  }
  CheckpointIndex index;
  if (!index.ParseFromIstream(&file)) {
    return absl::DataLossError(absl::StrCat(path, " does not parse"));
  }
  if (index.format_version() != kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": format version ", index.format_version(), ", this chief reads ",
        kCheckpointFormatVersion));
  }
  return index;
}

absl::Status VerifyCheckpointData(const std::string& dir,
                                  const CheckpointIndex& index) {
  RegionReader reader(dir);
  for (const CheckpointVariable& v : index.variables()) {
    for (const CheckpointSlice& s : v.slices()) {
      PSTRAIN_RETURN_IF_ERROR(reader.Read(s.values(), v.name()).status());
      if (s.has_ids() && s.ids().length() > 0) {
        PSTRAIN_RETURN_IF_ERROR(
            reader.Read(s.ids(), absl::StrCat(v.name(), " ids")).status());
      }
    }
  }
  return absl::OkStatus();
}

std::vector<SavedSlice> ToSavedSlices(const CheckpointIndex& index) {
  std::vector<SavedSlice> slices;
  for (const CheckpointVariable& v : index.variables()) {
    for (const CheckpointSlice& s : v.slices()) {
      SavedSlice& out = slices.emplace_back();
      out.set_name(v.name());
      if (s.has_rows()) *out.mutable_rows() = s.rows();
      out.set_file(s.values().file());
      out.set_offset(s.values().offset());
      out.set_length(s.values().length());
      out.set_crc32c(s.values().crc32c());
      out.set_num_rows(s.num_rows());
      out.set_version(s.version());
      if (s.has_ids()) {
        out.set_ids_offset(s.ids().offset());
        out.set_ids_crc32c(s.ids().crc32c());
      }
    }
  }
  return slices;
}

absl::StatusOr<std::vector<WholeVariable>> ReadVariables(
    const std::string& dir, const CheckpointIndex& index, bool with_slots) {
  std::map<std::string, const CheckpointVariable*> by_name;
  for (const CheckpointVariable& v : index.variables()) by_name[v.name()] = &v;
  std::vector<const CheckpointVariable*> wanted;
  for (const VariableDef& def : index.config().variables()) {
    auto it = by_name.find(def.name());
    if (it == by_name.end()) {
      return absl::DataLossError(absl::StrCat(
          dir, ": the index has no entry for variable '", def.name(), "'"));
    }
    wanted.push_back(it->second);
    if (!with_slots) continue;
    const std::string prefix = def.name() + "/";
    for (const auto& [name, v] : by_name) {
      // A slot is "<variable>/<slot>", the slot name without a '/'.
      if (name.rfind(prefix, 0) == 0 &&
          name.find('/', prefix.size()) == std::string::npos) {
        wanted.push_back(v);
      }
    }
  }

  RegionReader reader(dir);
  std::vector<WholeVariable> out;
  for (const CheckpointVariable* v : wanted) {
    WholeVariable& whole = out.emplace_back();
    whole.name = v->name();
    whole.dtype = v->dtype();
    whole.shape.assign(v->shape().dims().begin(), v->shape().dims().end());
    PSTRAIN_ASSIGN_OR_RETURN(int64_t row_bytes, ElementSize(v->dtype()));
    if (!ShapeFits(whole.shape, row_bytes)) {
      return absl::DataLossError(absl::StrCat(
          dir, ": '", v->name(), "': invalid shape [",
          absl::StrJoin(whole.shape, ", "), "]"));
    }
    if (!whole.shape.empty() && whole.shape[0] == 0) {
      for (size_t d = 1; d < whole.shape.size(); ++d) row_bytes *= whole.shape[d];
      WholeVariable ids;
      PSTRAIN_RETURN_IF_ERROR(
          ReadGrowingTable(&reader, *v, row_bytes, &whole, &ids));
      out.push_back(std::move(ids));
      continue;
    }
    for (size_t d = 1; d < whole.shape.size(); ++d) row_bytes *= whole.shape[d];
    const int64_t rows = whole.shape.empty() ? 1 : whole.shape[0];
    // Appended slice by slice, as read: the shape alone may claim more than
    // the files hold.
    whole.data.clear();
    int64_t next_row = 0;  // slices are in row order and must tile the rows
    for (const CheckpointSlice& s : v->slices()) {
      const int64_t begin = whole.shape.empty() ? 0 : s.rows().begin();
      const int64_t end = whole.shape.empty() ? 1 : s.rows().end();
      if (begin != next_row || end <= begin || end > rows ||
          s.values().length() != (end - begin) * row_bytes) {
        return absl::DataLossError(absl::StrCat(
            dir, ": '", v->name(), "': slice of rows [", begin, ", ", end,
            ") with ", s.values().length(), " bytes does not continue at row ",
            next_row, " of ", rows));
      }
      PSTRAIN_ASSIGN_OR_RETURN(std::string bytes,
                               reader.Read(s.values(), v->name()));
      whole.data += bytes;  // At row `begin`: the slices tile in order.
      next_row = end;
    }
    if (next_row != rows) {
      return absl::DataLossError(absl::StrCat(dir, ": '", v->name(),
                                              "': slices end at row ", next_row,
                                              " of ", rows));
    }
  }
  return out;
}

absl::StatusOr<std::optional<ReadCheckpoint>> ReadCheckpointUnlessPruned(
    const std::string& dir) {
  ReadCheckpoint read;
  absl::Status status = [&]() -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(read.index, ReadCheckpointIndex(dir));
    PSTRAIN_ASSIGN_OR_RETURN(read.variables,
                             ReadVariables(dir, read.index, false));
    return absl::OkStatus();
  }();
  if (status.ok()) return read;
  std::error_code error;
  if (!std::filesystem::exists(dir, error) && !error) return std::nullopt;
  return status;
}

absl::StatusOr<LoadedCheckpoint> FindLatestGoodCheckpoint(
    const std::string& model_dir,
    const std::function<void(absl::string_view)>& log) {
  const std::vector<CheckpointRef> complete = ListCompleteCheckpoints(model_dir);
  if (complete.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no complete checkpoint in ", model_dir));
  }
  absl::Status last;
  for (const CheckpointRef& ref : complete) {
    absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(ref.dir);
    absl::Status status = index.status();
    if (status.ok()) status = VerifyCheckpointData(ref.dir, *index);
    if (status.ok()) return LoadedCheckpoint{ref.dir, *std::move(index)};
    log(absl::StrCat("checkpoint ", ref.dir, " is damaged (", status.message(),
                     "); falling back to the previous one"));
    last = status;
  }
  return absl::DataLossError(absl::StrCat(
      "every checkpoint in ", model_dir, " is damaged; the oldest: ",
      last.message()));
}

}  // namespace chief
}  // namespace pstrain
