// One worker's share of a Criteo-format data set (criteo_line.h), streamed
// from its files (criteo_files.h) in batches of what the model is fed: the
// label, the 13 transformed integer features ("dense") and the 26 ids
// ("sparse"). Files are read in pieces (line_reader.h), never whole.
//
// Sharding: the files' lines are numbered 0, 1, 2, ... across the files, in
// order (the global line index g; blank and malformed lines count), and cut
// into blocks of B. Of W workers, worker w takes the blocks k with
// k mod W == w: the lines g with (g / B) mod W == w, in order, B to a batch.
// Every line is thus taken by exactly one worker per pass, whatever the
// number and sizes of the files. This is ShardPlan's unshuffled order
// (shard_plan.h): at step s, worker w's batch holds lines
// [s*W*B + w*B, s*W*B + (w+1)*B), its block of the step's global batch, so a
// line keeps its place in the global batch however many workers share it.
// Every worker reads (and decompresses) every file but parses only its own
// lines. An epoch is one pass: open a new reader for the next. A worker's
// reader may run out a step before another's (when the last global batch
// has fewer than w*B + 1 rows): a synchronous trainer takes ShardPlan's
// steps_per_epoch, from CountCriteoLines, and contributes an empty batch at
// such a step, as it does with ShardPlan today.
//
// Malformed lines (criteo_line.h): with BadLines::kRefuse the pass fails
// with INVALID_ARGUMENT naming the file, the line in it and the column; with
// kSkip the worker that owns the line skips it and counts it (so a worker may
// end its pass with fewer examples than the others). A last line without a
// newline is read like any other when it is complete; when it is not (a
// truncated file), it is malformed, and the error says it may be truncated.
//
// Resuming: `start_line` makes the reader pass over the lines before that
// global index unparsed; a reader opened with start_line = next_line() of
// another (same files and options) continues where that one stopped. Lines
// passed over are still read (and decompressed).
//
//   CriteoReaderOptions options;
//   options.num_workers = 2;
//   options.worker_index = 1;
//   options.batch_size = 512;
//   PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
//                            ListCriteoFiles(dir, "train"));
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CriteoReader> reader,
//                            CriteoReader::Open(files, options));
//   CriteoBatch batch;
//   for (;;) {
//     PSTRAIN_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
//     if (!more) break;
//     Step(batch.labels, batch.dense, batch.sparse);
//   }
//
// Not thread-safe: one reader per thread.
#ifndef PSTRAIN_DATA_CRITEO_READER_H_
#define PSTRAIN_DATA_CRITEO_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/line_reader.h"

namespace pstrain {
namespace data {

enum class BadLines {
  kRefuse,  // A malformed line fails the pass (the default).
  kSkip,    // A malformed line is skipped and counted.
};

struct CriteoReaderOptions {
  int num_workers = 1;       // W >= 1.
  int worker_index = 0;      // w in [0, W).
  int64_t batch_size = 512;  // B >= 1: rows per batch.
  BadLines bad_lines = BadLines::kRefuse;
  int64_t start_line = 0;  // >= 0: the global line index to start at.
  int64_t max_line_bytes = LineReader::kDefaultMaxLineBytes;
};

// A batch of rows, row-major. The vectors keep their capacity across Next
// calls, so a reused batch allocates only once.
struct CriteoBatch {
  std::vector<float> labels;     // [size()]: 0 or 1.
  std::vector<float> dense;      // [size() * 13]: log(1 + max(I_j, 0)).
  std::vector<uint64_t> sparse;  // [size() * 26]: criteo_hash.h's ids.
  std::vector<int64_t> lines;    // [size()]: each row's global line index.
  // The reader's next_line() once this batch was filled: where a reader
  // resumes after the batches up to this one.
  int64_t next_line = 0;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  void clear();
};

class CriteoReader {
 public:
  // INVALID_ARGUMENT naming the option when one is out of range or `paths`
  // is empty; the errno's code (NOT_FOUND, ...) naming a path that cannot
  // be read.
  static absl::StatusOr<std::unique_ptr<CriteoReader>> Open(
      std::vector<std::string> paths, const CriteoReaderOptions& options);

  // Fills `batch` with this worker's next batch_size rows (fewer only when
  // the files end) and returns true; returns false, with `batch` empty,
  // once the pass is over. Errors (a malformed line under kRefuse, a file
  // that cannot be read or a corrupt gzip stream) name the file and line;
  // after one, every call returns it again.
  absl::StatusOr<bool> Next(CriteoBatch* batch);

  // The global line index after the last line of the batches returned so
  // far: a reader opened with start_line at it continues from there.
  int64_t next_line() const { return next_line_; }
  // Malformed lines of this worker skipped so far (kSkip), and the error
  // of the first (empty when none), for a warning in the log.
  int64_t bad_lines() const { return bad_lines_; }
  const std::string& first_bad_line() const { return first_bad_line_; }

 private:
  CriteoReader(std::vector<std::string> paths,
               const CriteoReaderOptions& options);
  // Fills `batch`; Next remembers a failure.
  absl::StatusOr<bool> Fill(CriteoBatch* batch);

  const std::vector<std::string> paths_;
  const CriteoReaderOptions options_;
  size_t next_file_ = 0;              // Index in paths_ of the next to open.
  std::unique_ptr<LineReader> file_;  // The file being read, if any.
  int64_t global_line_ = 0;           // Index of the next line read.
  int64_t next_line_ = 0;
  int64_t bad_lines_ = 0;
  std::string first_bad_line_;
  absl::Status failed_;
};

// The number of lines of `paths` as the reader numbers them: what a trainer
// needs for steps per epoch (ShardPlan's ceil(N / (W*B))). Reads every file.
absl::StatusOr<int64_t> CountCriteoLines(
    const std::vector<std::string>& paths,
    int64_t max_line_bytes = LineReader::kDefaultMaxLineBytes);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_READER_H_
