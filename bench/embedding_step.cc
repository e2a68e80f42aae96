// What one sync step costs a ps piece of a growing embedding table, without
// the network: --workers workers each read the rows of a batch of distinct
// ids (the pull before the step) and add their row gradients (the push); the
// last push applies Adagrad to the touched rows. Ids follow a Zipf law over
// --rows ids (as Criteo's feature values do), and the table holds them all
// before timing starts, so the figure is that of a table far larger than
// the caches. Prints ns per row read and per row pushed and applied. Not a
// test: run it by hand, before and after a change to ps/embedding_table.cc.
//
//   bazel run --config=opt //bench:embedding_step -- --rows=640000
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/growing_table.h"
#include "ps/embedding_table.h"
#include "ps/sync_step.h"

ABSL_FLAG(int64_t, rows, 640000, "Distinct ids the table holds");
ABSL_FLAG(int64_t, width, 16, "Embedding width");
ABSL_FLAG(int64_t, ids, 6500,
          "Ids a worker's batch draws per step (before deduplication)");
ABSL_FLAG(int, workers, 2, "Workers per step");
ABSL_FLAG(int, steps, 400, "Timed steps");
ABSL_FLAG(double, zipf, 1.05, "Zipf exponent of the ids' frequencies");

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t rows = absl::GetFlag(FLAGS_rows);
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t draws = absl::GetFlag(FLAGS_ids);
  const int workers = absl::GetFlag(FLAGS_workers);
  const int steps = absl::GetFlag(FLAGS_steps);
  if (rows < 1 || width < 1 || draws < 1 || workers < 1 || steps < 1) {
    std::fprintf(stderr,
                 "--rows, --width, --ids, --workers, --steps must be >= 1\n");
    return 2;
  }
  absl::StatusOr<pstrain::bench::GrowingTable> made =
      pstrain::bench::MakeGrowingTable(width, /*max_rows=*/0);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }
  pstrain::ps::EmbeddingTable* const table = made->table.get();
  table->SetWorkers(workers, {});

  // Rank r (0 = most frequent) is id Spread(r): hashed ids are spread.
  const auto spread = [](int64_t r) {
    return static_cast<int64_t>(
        (static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ULL) >> 2);
  };
  std::vector<double> cdf(rows);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    total +=
        1.0 / std::pow(static_cast<double>(r + 1), absl::GetFlag(FLAGS_zipf));
    cdf[r] = total;
  }
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> uniform(0.0, total);
  const auto draw_batch = [&](std::vector<int64_t>* ids) {
    absl::flat_hash_set<int64_t> seen;
    ids->clear();
    for (int64_t i = 0; i < draws; ++i) {
      const int64_t r =
          std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin();
      if (seen.insert(spread(r)).second) ids->push_back(spread(r));
    }
  };
  // Every id gets its row before timing.
  {
    std::vector<int64_t> all(rows);
    for (int64_t r = 0; r < rows; ++r) all[r] = spread(r);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<float> out(all.size() * width);
    if (!table->Read(all, 0, absl::InfiniteFuture(), out.data()).ok()) return 1;
  }
  // The batches are drawn beforehand: the timing is the table's alone.
  std::vector<std::vector<int64_t>> batches(static_cast<size_t>(steps) *
                                            workers);
  int64_t max_ids = 0;
  for (auto& batch : batches) {
    draw_batch(&batch);
    max_ids = std::max<int64_t>(max_ids, batch.size());
  }
  std::vector<float> values(max_ids * width);
  std::vector<float> grads(max_ids * width, 0.01f);
  double read_s = 0, push_s = 0;
  int64_t rows_moved = 0;
  for (int step = 0; step < steps; ++step) {
    for (int w = 0; w < workers; ++w) {
      const std::vector<int64_t>& ids = batches[step * workers + w];
      const Clock::time_point start = Clock::now();
      if (!table->Read(ids, step, absl::InfiniteFuture(), values.data()).ok()) {
        return 1;
      }
      read_s += Seconds(start);
      rows_moved += ids.size();
    }
    for (int w = 0; w < workers; ++w) {
      const std::vector<int64_t>& ids = batches[step * workers + w];
      pstrain::ps::Contribution c;
      c.sender = w;
      c.batch_size = 512;
      const Clock::time_point start = Clock::now();
      if (!table->AccumulateSync(step, ids, grads.data(), c)) return 1;
      push_s += Seconds(start);
    }
  }
  std::printf(
      "rows %lld, width %lld, %d workers x %.0f distinct ids per step, %d "
      "steps\n"
      "read %.1f ns per row; push and apply %.1f ns per row pushed\n",
      static_cast<long long>(rows), static_cast<long long>(width), workers,
      static_cast<double>(rows_moved) / (steps * workers), steps,
      read_s * 1e9 / rows_moved, push_s * 1e9 / rows_moved);
  return 0;
}
