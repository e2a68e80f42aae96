// Read throughput of the Criteo reader (data/criteo_reader.h): one worker's
// pass over a data directory's files, parsed into batches and dropped.
//
//   /usr/bin/python3 bench/criteo_gen.py --out_dir /tmp/criteo --scale 1
//   bazel run --config=opt //bench:criteo_read -- --data_dir /tmp/criteo
//   bazel run --config=opt //bench:criteo_read -- --data_dir /tmp/criteo \
//       --workers 2 --worker_index 1
//
// Prints one JSON line:
//   {"files":1,"workers":1,"worker_index":0,"batch":512,"rows":1000000,
//    "positive_rate":0.249,"bad_lines":0,"seconds":...,"rows_per_sec":...}
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "data/criteo_files.h"
#include "data/criteo_reader.h"

ABSL_FLAG(std::string, data_dir, "/tmp/criteo",
          "Folder of train*.tsv[.gz] and test*.tsv[.gz]");
ABSL_FLAG(std::string, split, "train", "train or test");
ABSL_FLAG(int, workers, 1, "Workers the files are sharded across");
ABSL_FLAG(int, worker_index, 0, "This reader's worker");
ABSL_FLAG(int64_t, batch_size, 512, "Rows per batch");
ABSL_FLAG(std::string, bad_lines, "refuse", "refuse or skip");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string bad_lines = absl::GetFlag(FLAGS_bad_lines);
  if (bad_lines != "refuse" && bad_lines != "skip") {
    std::fprintf(stderr, "--bad_lines is '%s'; must be refuse or skip\n",
                 bad_lines.c_str());
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> files =
      pstrain::data::ListCriteoFiles(
          absl::GetFlag(FLAGS_data_dir),
          pstrain::data::DefaultCriteoPatterns(absl::GetFlag(FLAGS_split)));
  if (!files.ok()) {
    std::fprintf(stderr, "%s\n", files.status().ToString().c_str());
    return 2;
  }
  pstrain::data::CriteoReaderOptions options;
  options.num_workers = absl::GetFlag(FLAGS_workers);
  options.worker_index = absl::GetFlag(FLAGS_worker_index);
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.bad_lines = bad_lines == "skip" ? pstrain::data::BadLines::kSkip
                                          : pstrain::data::BadLines::kRefuse;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<pstrain::data::CriteoReader>> reader =
      pstrain::data::CriteoReader::Open(*files, options);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 2;
  }
  pstrain::data::CriteoBatch batch;
  int64_t rows = 0;
  double positives = 0;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&batch);
    if (!more.ok()) {
      std::fprintf(stderr, "%s\n", more.status().ToString().c_str());
      return 1;
    }
    if (!*more) break;
    rows += batch.size();
    for (const float label : batch.labels) positives += label;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf(
      "{\"files\":%zu,\"workers\":%d,\"worker_index\":%d,\"batch\":%lld,"
      "\"rows\":%lld,\"positive_rate\":%.4f,\"bad_lines\":%lld,"
      "\"seconds\":%.3f,\"rows_per_sec\":%.0f}\n",
      files->size(), options.num_workers, options.worker_index,
      static_cast<long long>(options.batch_size), static_cast<long long>(rows),
      rows > 0 ? positives / rows : 0.0,
      static_cast<long long>((*reader)->bad_lines()), seconds,
      seconds > 0 ? rows / seconds : 0.0);
  return 0;
}
