#include "data/criteo_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/criteo_line.h"

namespace pstrain {
namespace data {

void CriteoBatch::clear() {
  labels.clear();
  dense.clear();
  sparse.clear();
  lines.clear();
}

absl::StatusOr<std::unique_ptr<CriteoReader>> CriteoReader::Open(
    std::vector<std::string> paths, const CriteoReaderOptions& options) {
  if (paths.empty()) {
    return absl::InvalidArgumentError("CriteoReader: no files to read");
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoReaderOptions.num_workers is ", options.num_workers,
                     "; must be >= 1"));
  }
  if (options.worker_index < 0 || options.worker_index >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CriteoReaderOptions.worker_index is ", options.worker_index,
        "; must be in 0..", options.num_workers - 1));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoReaderOptions.batch_size is ", options.batch_size,
                     "; must be >= 1"));
  }
  if (options.start_line < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoReaderOptions.start_line is ", options.start_line,
                     "; must be >= 0"));
  }
  for (const std::string& path : paths) {
    struct stat info;
    if (stat(path.c_str(), &info) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("cannot read '", path, "'"));
    }
  }
  return std::unique_ptr<CriteoReader>(
      new CriteoReader(std::move(paths), options));
}

CriteoReader::CriteoReader(std::vector<std::string> paths,
                           const CriteoReaderOptions& options)
    : paths_(std::move(paths)),
      options_(options),
      next_line_(options.start_line) {}

absl::StatusOr<bool> CriteoReader::Next(CriteoBatch* batch) {
  batch->clear();
  if (!failed_.ok()) return failed_;
  absl::StatusOr<bool> more = Fill(batch);
  if (!more.ok()) {
    failed_ = more.status();
    batch->clear();
  }
  return more;
}

absl::StatusOr<bool> CriteoReader::Fill(CriteoBatch* batch) {
  const int64_t workers = options_.num_workers;
  const int64_t worker = options_.worker_index;
  absl::string_view line;
  while (batch->size() < options_.batch_size) {
    if (file_ == nullptr) {
      if (next_file_ == paths_.size()) break;
      PSTRAIN_ASSIGN_OR_RETURN(
          file_, LineReader::Open(paths_[next_file_], options_.max_line_bytes));
      ++next_file_;
    }
    PSTRAIN_ASSIGN_OR_RETURN(const bool more, file_->Next(&line));
    if (!more) {
      file_.reset();
      continue;
    }
    const int64_t g = global_line_++;
    // Line g is in block g / B, and blocks go round the workers.
    if (g < options_.start_line ||
        (g / options_.batch_size) % workers != worker) {
      continue;
    }
    const size_t row = batch->labels.size();
    batch->labels.resize(row + 1);
    batch->dense.resize((row + 1) * kCriteoDense);
    batch->sparse.resize((row + 1) * kCriteoSparse);
    const absl::Status parsed = ParseCriteoLine(
        line, &batch->labels[row], &batch->dense[row * kCriteoDense],
        &batch->sparse[row * kCriteoSparse]);
    if (!parsed.ok()) {
      std::string error =
          absl::StrCat("'", file_->path(), "': line ", file_->line_number(),
                       ": ", parsed.message());
      if (!file_->terminated()) {
        absl::StrAppend(&error,
                        " (the file's last line, which has no newline: is "
                        "the file truncated?)");
      }
      if (options_.bad_lines == BadLines::kRefuse) {
        return absl::InvalidArgumentError(error);
      }
      if (bad_lines_ == 0) first_bad_line_ = std::move(error);
      ++bad_lines_;
      batch->labels.resize(row);
      batch->dense.resize(row * kCriteoDense);
      batch->sparse.resize(row * kCriteoSparse);
      next_line_ = g + 1;
      continue;
    }
    batch->lines.push_back(g);
    next_line_ = g + 1;
  }
  batch->next_line = next_line_;
  return batch->size() > 0;
}

absl::StatusOr<int64_t> CountCriteoLines(const std::vector<std::string>& paths,
                                         int64_t max_line_bytes) {
  int64_t lines = 0;
  absl::string_view line;
  for (const std::string& path : paths) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader,
                             LineReader::Open(path, max_line_bytes));
    for (;;) {
      PSTRAIN_ASSIGN_OR_RETURN(const bool more, reader->Next(&line));
      if (!more) break;
      ++lines;
    }
  }
  return lines;
}

}  // namespace data
}  // namespace pstrain
