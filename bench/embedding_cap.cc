// Memory of a growing embedding table under --embedding_max_rows: inserts
// --ids distinct ids (pushes of --batch ids each, the ps's update path) into
// one EmbeddingTable piece capped at --max_rows rows, and prints the
// process's resident memory (VmRSS, and its peak VmHWM, from
// /proc/self/status) before and after, beside what the rows would take
// without the cap. Not a test: run it by hand.
//
//   bazel run -c opt //bench:embedding_cap -- --ids=10000000 --max_rows=100000
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/growing_table.h"
#include "ps/embedding_table.h"

ABSL_FLAG(int64_t, ids, 10000000, "Distinct ids to insert");
ABSL_FLAG(int64_t, max_rows, 100000, "The table's cap (lifecycle.max_rows)");
ABSL_FLAG(int64_t, width, 16, "Embedding width");
ABSL_FLAG(int64_t, batch, 4096, "Ids per push");

namespace {

// A field of /proc/self/status in kB ("VmRSS"), or -1.
int64_t StatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t ids = absl::GetFlag(FLAGS_ids);
  const int64_t max_rows = absl::GetFlag(FLAGS_max_rows);
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  if (ids < 1 || max_rows < 0 || width < 1 || batch < 1) {
    std::fprintf(stderr,
                 "--ids, --width, --batch must be >= 1, --max_rows >= 0\n");
    return 2;
  }
  absl::StatusOr<pstrain::bench::GrowingTable> made =
      pstrain::bench::MakeGrowingTable(width, max_rows);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }
  pstrain::ps::EmbeddingTable* const table = made->table.get();
  std::vector<int64_t> batch_ids(batch);
  std::vector<float> grads(batch * width, 0.01f);
  const int64_t rss_before = StatusKb("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  int64_t most_rows = 0;
  for (int64_t first = 0; first < ids; first += batch) {
    const int64_t n = std::min(batch, ids - first);
    // Spread ids, as hashed feature values are (distinct by construction).
    for (int64_t i = 0; i < n; ++i) {
      batch_ids[i] = (first + i) * 2654435761LL % (int64_t{1} << 62);
    }
    table->ApplyAsync(absl::MakeSpan(batch_ids.data(), n), grads.data(), 1);
    most_rows = std::max(most_rows, table->num_rows());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t per_row = table->bytes_per_row();
  std::printf(
      "ids %lld  max_rows %lld  width %lld (adagrad: value + 1 slot)\n"
      "rows held %lld (most %lld), evicted %lld, %.2f M ids/s\n"
      "bytes per row %lld; table values+slots %lld B, metadata %lld B\n"
      "uncapped the rows would take %.1f MiB\n"
      "VmRSS before %lld kB, after %lld kB (+%.1f MiB); VmHWM %lld kB\n",
      static_cast<long long>(ids), static_cast<long long>(max_rows),
      static_cast<long long>(width), static_cast<long long>(table->num_rows()),
      static_cast<long long>(most_rows),
      static_cast<long long>(table->rows_evicted()), ids / seconds / 1e6,
      static_cast<long long>(per_row),
      static_cast<long long>(table->bytes_held()),
      static_cast<long long>(table->metadata_bytes()),
      static_cast<double>(ids) * per_row / (1 << 20),
      static_cast<long long>(rss_before),
      static_cast<long long>(StatusKb("VmRSS")),
      (StatusKb("VmRSS") - rss_before) / 1024.0,
      static_cast<long long>(StatusKb("VmHWM")));
  return 0;
}
