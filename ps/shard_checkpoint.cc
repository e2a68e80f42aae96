// Shard::Save and Shard::Restore: a shard's part of a checkpoint.
//
// One data file per ps task, "ps-<task>.data", holds raw little-endian
// arrays back to back: for each dense piece its value and optimizer slots;
// for each embedding table its ids (growing tables) and rows. Every array is
// one SavedSlice (file, offset, length, CRC32C, rows), which the chief puts
// in the checkpoint index; Restore reads them back, whatever placement wrote
// them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "ps/dense_checkpoint.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {
namespace {

absl::Status CheckFileName(const std::string& file) {
  if (file.empty() || absl::StrContains(file, '/') || file == "." ||
      file == "..") {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint slice file \"", file,
        "\" is not a plain file name in the checkpoint directory"));
  }
  return absl::OkStatus();
}

// Reads byte ranges of the files of one checkpoint directory, checking each
// against its expected length and CRC32C.
class RegionReader {
 public:
  explicit RegionReader(std::string directory) : directory_(std::move(directory)) {}
  ~RegionReader() {
    for (const auto& [name, fd] : fds_) close(fd);
  }

  absl::StatusOr<std::string> Read(const std::string& file, int64_t offset,
                                   int64_t length, uint32_t crc32c) {
    PSTRAIN_RETURN_IF_ERROR(CheckFileName(file));
    const std::string path = absl::StrCat(directory_, "/", file);
    auto it = fds_.find(file);
    if (it == fds_.end()) {
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
      it = fds_.emplace(file, fd).first;
    }
    if (offset < 0 || length < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": negative offset ", offset, " or length ", length));
    }
    // Against the file's size before allocating: a damaged index may give
    // any length, and an offset near 2^63 that pread refuses.
    struct stat info;
    if (fstat(it->second, &info) != 0) {
      return ErrnoStatus(errno, absl::StrCat("stat ", path));
    }
    if (offset > info.st_size || length > info.st_size - offset) {
      return absl::DataLossError(absl::StrCat(
          path, ": truncated: ", length, " bytes at offset ", offset,
          " expected, the file ends at ", info.st_size));
    }
    std::string data(length, '\0');
    int64_t done = 0;
    while (done < length) {
      const ssize_t n = pread(it->second, data.data() + done, length - done,
                              offset + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, absl::StrCat("read ", path));
      }
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(
            path, ": truncated: bytes [", offset, ", ", offset + length,
            ") expected, the file ends at ", offset + done));
      }
      done += n;
    }
    // The computed CRC32C is not put in the message: it would tell the
    // caller the bytes read.
    if (Crc32c(data.data(), data.size()) != crc32c) {
      return absl::DataLossError(absl::StrCat(path, ": bytes [", offset, ", ",
                                              offset + length,
                                              ") fail their CRC32C check"));
    }
    return data;
  }

 private:
  const std::string directory_;
  std::map<std::string, int> fds_;
};

// Whether `length` bytes are `rows` rows of `row_bytes` each, without
// overflowing on the damaged values of a checkpoint index.
bool HoldsRows(int64_t length, int64_t rows, int64_t row_bytes) {
  if (rows < 0 || length < 0) return false;
  if (row_bytes == 0) return length == 0;
  return length % row_bytes == 0 && length / row_bytes == rows;
}

// Copies the rows of `slices` (ranges of a row-sliced array) that fall in
// [begin, end) into `out` ((end - begin) * row_bytes bytes). Every row must
// be found exactly once.
absl::Status GatherRows(RegionReader* reader, const std::string& name,
                        const std::vector<const SavedSlice*>& slices,
                        int64_t begin, int64_t end, int64_t row_bytes,
                        char* out, int64_t* version) {
  // The parts of [begin, end) the slices hold, which must tile it.
  std::vector<std::pair<int64_t, int64_t>> parts;
  for (const SavedSlice* s : slices) {
    const int64_t from = std::max(begin, s->rows().begin());
    const int64_t to = std::min(end, s->rows().end());
    if (from >= to) continue;
    // The slice overlaps [begin, end), so its end is above its begin; from
    // a begin >= 0 its row count cannot overflow.
    if (s->rows().begin() < 0 ||
        !HoldsRows(s->length(), s->rows().end() - s->rows().begin(),
                   row_bytes)) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint slice of '", name, "' rows [", s->rows().begin(), ", ",
          s->rows().end(), ") has ", s->length(),
          " bytes, which are not its rows of ", row_bytes, " bytes"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        std::string data,
        reader->Read(s->file(), s->offset(), s->length(), s->crc32c()));
    std::memcpy(out + (from - begin) * row_bytes,
                data.data() + (from - s->rows().begin()) * row_bytes,
                (to - from) * row_bytes);
    parts.emplace_back(from, to);
    *version = s->version();
  }
  std::sort(parts.begin(), parts.end());
  auto lacks = [&](int64_t from, int64_t to) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint lacks rows [", from, ", ", to, ") of '",
                     name, "' (rows [", begin, ", ", end, ") wanted)"));
  };
  int64_t covered = begin;
  for (const auto& [from, to] : parts) {
    if (from < covered) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint slices of '", name, "' overlap at row ", from));
    }
    if (from > covered) return lacks(covered, from);
    covered = to;
  }
  if (covered != end) return lacks(covered, end);
  return absl::OkStatus();
}

// The rows of a growing table's `slices` (each with its own ids) whose ids
// `table` owns, `row_bytes` each, in the slices' order: their ids into
// *ids and bytes appended to *rows.
absl::Status GatherOwnedRows(RegionReader* reader, const std::string& array,
                             const std::vector<const SavedSlice*>& slices,
                             int64_t row_bytes, const EmbeddingTable& table,
                             std::vector<int64_t>* ids, std::string* rows) {
  for (const SavedSlice* s : slices) {
    if (!HoldsRows(s->length(), s->num_rows(), row_bytes) ||
        s->num_rows() > std::numeric_limits<int64_t>::max() / 8) {
      return absl::DataLossError(
          absl::StrCat("checkpoint slice of '", array, "' holds ", s->length(),
                       " bytes for ", s->num_rows(), " rows"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::string id_bytes,
                             reader->Read(s->file(), s->ids_offset(),
                                          s->num_rows() * 8, s->ids_crc32c()));
    PSTRAIN_ASSIGN_OR_RETURN(
        std::string data,
        reader->Read(s->file(), s->offset(), s->length(), s->crc32c()));
    for (int64_t r = 0; r < s->num_rows(); ++r) {
      int64_t id;
      std::memcpy(&id, id_bytes.data() + r * 8, 8);
      if (!table.OwnsId(id)) continue;
      ids->push_back(id);
      rows->append(data, r * row_bytes, row_bytes);
    }
  }
  return absl::OkStatus();
}

// A growing table's lifecycle data ("<name>/lifecycle" per row,
// "<name>/admission" per pending id; rows of two int64) in `by_name`, for
// the rows `ids` the table restores. Absent arrays (a checkpoint of a run
// without a lifecycle) leave *stats null: counts start over.
absl::Status GatherRowStats(
    RegionReader* reader,
    const std::map<std::string, std::vector<const SavedSlice*>>& by_name,
    const EmbeddingTable& table, const std::vector<int64_t>& ids,
    std::optional<EmbeddingTable::RowStats>* stats) {
  auto lifecycle = by_name.find(table.name() + "/lifecycle");
  if (lifecycle == by_name.end()) return absl::OkStatus();
  EmbeddingTable::RowStats& out = stats->emplace();
  std::vector<int64_t> row_ids;
  std::string rows;
  PSTRAIN_RETURN_IF_ERROR(GatherOwnedRows(
      reader, lifecycle->first, lifecycle->second, 16, table, &row_ids, &rows));
  if (row_ids != ids) {
    return absl::DataLossError(
        absl::StrCat("checkpoint rows of '", lifecycle->first,
                     "' do not match those of '", table.name(), "'"));
  }
  auto pairs = [](const std::string& bytes, std::vector<int64_t>* first,
                  std::vector<int64_t>* second) {
    for (size_t r = 0; r < bytes.size() / 16; ++r) {
      int64_t pair[2];
      std::memcpy(pair, bytes.data() + r * 16, 16);
      first->push_back(pair[0]);
      second->push_back(pair[1]);
    }
  };
  pairs(rows, &out.counts, &out.last_updates);
  auto admission = by_name.find(table.name() + "/admission");
  if (admission == by_name.end()) return absl::OkStatus();
  std::string pending;
  PSTRAIN_RETURN_IF_ERROR(GatherOwnedRows(reader, admission->first,
                                          admission->second, 16, table,
                                          &out.pending_ids, &pending));
  pairs(pending, &out.pending_counts, &out.pending_last_seen);
  return absl::OkStatus();
}

absl::Status NotInCheckpoint(const std::string& name) {
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint has no '", name,
      "' (was it written for another model or optimizer?)"));
}

}  // namespace

absl::StatusOr<std::string> Shard::CheckpointDirectory(
    const std::string& name) const {
  if (options_.checkpoint_root.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps ", options_.ps_task,
        " has no checkpoint directory (start it with --model_dir)"));
  }
  bool plain = !name.empty() && name.size() <= 255 && name[0] != '.';
  for (const char c : name) {
    plain &= absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
             c == '_' || c == '-';
  }
  if (!plain) {
    return absl::InvalidArgumentError(
        "checkpoint directory: not a plain name inside the ps's --model_dir "
        "(letters, digits, '.', '_' and '-', not starting with '.')");
  }
  return absl::StrCat(options_.checkpoint_root, "/", name);
}

absl::Status Shard::Save(const SaveRequest& request, SaveResponse* response) {
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string directory,
                           CheckpointDirectory(request.directory()));
  if (run->update.mode() == UpdateConfig::SYNC) {
    auto check = [&](const std::string& name, int64_t version) -> absl::Status {
      if (version == request.step()) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "variable '", name, "' is at version ", version, ", not at step ",
          request.step(), ": save at a step boundary"));
    };
    for (const auto& [name, v] : run->dense) {
      PSTRAIN_RETURN_IF_ERROR(check(name, v->version()));
    }
    for (const auto& [name, t] : run->tables) {
      PSTRAIN_RETURN_IF_ERROR(check(name, t->version()));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(MakeDirectories(directory));
  const std::string file = absl::StrCat("ps-", options_.ps_task, ".data");
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<AtomicFile> out,
      AtomicFile::Create(absl::StrCat(directory, "/", file)));

  response->Clear();
  absl::Status status;
  auto append = [&](const std::string& name, const char* data, int64_t size,
                    SavedSlice* slice) {
    if (!status.ok()) return;
    absl::StatusOr<int64_t> offset = out->Append(data, size);
    if (!offset.ok()) {
      status = offset.status();
      return;
    }
    slice->set_name(name);
    slice->set_file(file);
    slice->set_offset(*offset);
    slice->set_length(size);
    slice->set_crc32c(Crc32c(data, size));
  };
  PSTRAIN_RETURN_IF_ERROR(AppendDenseArrays(run->dense, file, out.get(),
                                            response->mutable_slices()));
  for (const auto& [name, t] : run->tables) {
    std::vector<int64_t> ids;
    std::vector<std::vector<float>> arrays;
    EmbeddingTable::RowStats stats;
    const int64_t version =
        t->Snapshot(&ids, &arrays, t->has_lifecycle() ? &stats : nullptr);
    SavedSlice ids_slice;
    if (t->growing()) {
      append(name, reinterpret_cast<const char*>(ids.data()),
             ids.size() * sizeof(int64_t), &ids_slice);
    }
    for (int a = 0; a < t->num_arrays(); ++a) {
      SavedSlice* slice = response->add_slices();
      if (!t->growing()) {
        slice->mutable_rows()->set_begin(t->row_begin());
        slice->mutable_rows()->set_end(t->row_end());
      } else {
        slice->set_ids_offset(ids_slice.offset());
        slice->set_ids_crc32c(ids_slice.crc32c());
      }
      slice->set_num_rows(ids.size());
      slice->set_version(version);
      append(t->ArrayName(a), reinterpret_cast<const char*>(arrays[a].data()),
             arrays[a].size() * sizeof(float), slice);
    }
    if (!t->has_lifecycle()) continue;
    // Two int64 per row: (count, version), under ids of their own.
    auto append_pairs =
        [&](const std::string& array, const std::vector<int64_t>& pair_ids,
            const std::vector<int64_t>& first,
            const std::vector<int64_t>& second, const SavedSlice& ids_of) {
          std::vector<int64_t> pairs;
          for (size_t i = 0; i < first.size(); ++i) {
            pairs.push_back(first[i]);
            pairs.push_back(second[i]);
          }
          SavedSlice* slice = response->add_slices();
          slice->set_ids_offset(ids_of.offset());
          slice->set_ids_crc32c(ids_of.crc32c());
          slice->set_num_rows(pair_ids.size());
          slice->set_version(version);
          slice->set_dtype(DT_INT64);
          slice->set_row_width(2);
          append(array, reinterpret_cast<const char*>(pairs.data()),
                 pairs.size() * sizeof(int64_t), slice);
        };
    append_pairs(name + "/lifecycle", ids, stats.counts, stats.last_updates,
                 ids_slice);
    SavedSlice pending_ids;
    append(name, reinterpret_cast<const char*>(stats.pending_ids.data()),
           stats.pending_ids.size() * sizeof(int64_t), &pending_ids);
    append_pairs(name + "/admission", stats.pending_ids, stats.pending_counts,
                 stats.pending_last_seen, pending_ids);
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  return out->Commit();
}

absl::Status Shard::Restore(const RestoreRequest& request,
                            RestoreResponse* response) {
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string directory,
                           CheckpointDirectory(request.directory()));
  std::map<std::string, std::vector<const SavedSlice*>> by_name;
  for (const SavedSlice& slice : request.slices()) {
    PSTRAIN_RETURN_IF_ERROR(CheckFileName(slice.file()));
    by_name[slice.name()].push_back(&slice);
  }
  RegionReader reader(directory);

  // Stage everything; change nothing until every piece is complete.
  struct StagedDense {
    DenseVariable* variable;
    std::vector<std::string> arrays;
    int64_t version = 0;
  };
  struct StagedTable {
    EmbeddingTable* table;
    std::vector<int64_t> ids;
    std::vector<std::vector<float>> arrays;
    int64_t version = 0;
    std::optional<EmbeddingTable::RowStats> stats;
  };
  std::vector<StagedDense> dense;
  std::vector<StagedTable> tables;

  for (const auto& [name, v] : run->dense) {
    StagedDense staged{v.get(), {}, 0};
    const int64_t rows = v->row_end() - v->row_begin();
    const int64_t row_bytes = rows > 0 ? v->num_bytes() / rows : 0;
    for (int a = 0; a < v->num_arrays(); ++a) {
      const std::string array = v->ArrayName(a);
      auto it = by_name.find(array);
      if (it == by_name.end()) return NotInCheckpoint(array);
      std::string data(v->num_bytes(), '\0');
      int64_t version = 0;
      PSTRAIN_RETURN_IF_ERROR(GatherRows(&reader, array, it->second,
                                         v->row_begin(), v->row_end(),
                                         row_bytes, data.data(), &version));
      if (a == 0) staged.version = version;
      staged.arrays.push_back(std::move(data));
    }
    dense.push_back(std::move(staged));
  }

  for (const auto& [name, t] : run->tables) {
    StagedTable staged{t.get(), {}, {}, 0, std::nullopt};
    const int64_t row_bytes = t->width() * sizeof(float);
    staged.arrays.resize(t->num_arrays());
    for (int a = 0; a < t->num_arrays(); ++a) {
      const std::string array = t->ArrayName(a);
      auto it = by_name.find(array);
      if (it == by_name.end()) return NotInCheckpoint(array);
      std::vector<float>& out = staged.arrays[a];
      if (!t->growing()) {
        out.resize((t->row_end() - t->row_begin()) * t->width());
        PSTRAIN_RETURN_IF_ERROR(GatherRows(
            &reader, array, it->second, t->row_begin(), t->row_end(),
            row_bytes, reinterpret_cast<char*>(out.data()), &staged.version));
        continue;
      }
      // Growing: keep the rows whose ids fall in this piece's bucket, in the
      // order of the value array's slices (the same for every array).
      std::vector<int64_t> ids;
      for (const SavedSlice* s : it->second) {
        if (!HoldsRows(s->length(), s->num_rows(), row_bytes) ||
            s->num_rows() > std::numeric_limits<int64_t>::max() / 8) {
          return absl::DataLossError(absl::StrCat(
              "checkpoint slice of '", array, "' holds ", s->length(),
              " bytes for ", s->num_rows(), " rows"));
        }
        PSTRAIN_ASSIGN_OR_RETURN(
            std::string id_bytes,
            reader.Read(s->file(), s->ids_offset(), s->num_rows() * 8,
                        s->ids_crc32c()));
        PSTRAIN_ASSIGN_OR_RETURN(
            std::string rows,
            reader.Read(s->file(), s->offset(), s->length(), s->crc32c()));
        for (int64_t r = 0; r < s->num_rows(); ++r) {
          int64_t id;
          std::memcpy(&id, id_bytes.data() + r * 8, 8);
          if (!t->OwnsId(id)) continue;
          ids.push_back(id);
          const float* row = reinterpret_cast<const float*>(rows.data()) +
                             r * t->width();
          out.insert(out.end(), row, row + t->width());
        }
        staged.version = s->version();
      }
      if (a == 0) {
        staged.ids = std::move(ids);
      } else if (ids != staged.ids) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint rows of '", array, "' do not match those of '", name,
            "'"));
      }
    }
    if (!t->growing()) {
      for (int64_t id = t->row_begin(); id < t->row_end(); ++id) {
        staged.ids.push_back(id);
      }
    } else if (t->has_lifecycle()) {
      PSTRAIN_RETURN_IF_ERROR(
          GatherRowStats(&reader, by_name, *t, staged.ids, &staged.stats));
    }
    tables.push_back(std::move(staged));
  }

  absl::MutexLock apply_lock(&apply_mu_);
  generation_.store(request.generation());
  // The restored steps are trained, and pushed, again.
  recent_dense_.Clear();
  recent_sparse_.Clear();
  {
    // Their batches are no longer applied.
    absl::MutexLock lock(&ledger_mu_);
    const int64_t workers = run->update.num_workers();
    batches_applied_.erase(
        batches_applied_.lower_bound(request.step() * workers),
        batches_applied_.end());
  }
  for (StagedDense& s : dense) s.variable->Restore(s.arrays, s.version);
  for (StagedTable& s : tables) {
    s.table->Restore(s.ids, s.arrays, s.version,
                     s.stats.has_value() ? &*s.stats : nullptr);
  }
  response->set_num_variables(dense.size() + tables.size());
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace pstrain
