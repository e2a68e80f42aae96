#include "data/criteo_reader.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo_hash.h"
#include "data/criteo_line.h"
#include "data/shard_plan.h"
#include "data/test_files.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// The line of global index `g` in these tests: label g mod 2, I1 = g,
// I2 = -g, C1 = g in hex, C2 empty, C26 = 0xabc; the rest empty.
std::string TestLine(int64_t g) {
  std::vector<std::string> columns(kCriteoColumns);
  columns[0] = g % 2 == 0 ? "0" : "1";
  columns[1] = absl::StrCat(g);
  columns[2] = absl::StrCat(-g);
  columns[kCriteoDense + 1] = absl::StrCat(absl::Hex(g));
  columns[kCriteoDense + 26] = "abc";
  return absl::StrJoin(columns, "\t");
}

// Checks that row `row` of `batch` is the test line of global index `g`.
void ExpectRowIsLine(const CriteoBatch& batch, int64_t row, int64_t g) {
  ASSERT_LT(row, batch.size());
  EXPECT_EQ(batch.lines[row], g);
  EXPECT_EQ(batch.labels[row], g % 2 == 0 ? 0.0f : 1.0f) << "line " << g;
  const float* dense = &batch.dense[row * kCriteoDense];
  EXPECT_FLOAT_EQ(dense[0], static_cast<float>(std::log1p(g))) << "line " << g;
  for (int j = 1; j < kCriteoDense; ++j) EXPECT_EQ(dense[j], 0.0f);
  const uint64_t* sparse = &batch.sparse[row * kCriteoSparse];
  EXPECT_EQ(sparse[0], CriteoSparseId(1, g)) << "line " << g;
  EXPECT_EQ(sparse[1], CriteoMissingId(2));
  EXPECT_EQ(sparse[25], CriteoSparseId(26, 0xabc));
}

// Writes lines [first, first + count) to `name`, joined by `eol`, gzipped
// when `gzip`, the last line ending without a newline when `!final_eol`.
std::string WriteLines(const std::string& name, int64_t first, int64_t count,
                       bool gzip = false, const std::string& eol = "\n",
                       bool final_eol = true) {
  std::string text;
  for (int64_t g = first; g < first + count; ++g) {
    absl::StrAppend(&text, TestLine(g),
                    final_eol || g + 1 < first + count ? eol : "");
  }
  const std::string path = TempPath(name);
  WriteFile(path, gzip ? Gzip(text) : text);
  return path;
}

struct Pass {
  std::vector<CriteoBatch> batches;
  absl::Status status;
  int64_t bad_lines = 0;
  std::string first_bad_line;
};

Pass ReadPass(const std::vector<std::string>& paths,
              const CriteoReaderOptions& options) {
  Pass pass;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open(paths, options);
  if (!reader.ok()) {
    pass.status = reader.status();
    return pass;
  }
  for (;;) {
    CriteoBatch batch;
    absl::StatusOr<bool> more = (*reader)->Next(&batch);
    if (!more.ok()) {
      pass.status = more.status();
      break;
    }
    if (!*more) {
      EXPECT_EQ(batch.size(), 0);
      break;
    }
    pass.batches.push_back(std::move(batch));
  }
  pass.bad_lines = (*reader)->bad_lines();
  pass.first_bad_line = (*reader)->first_bad_line();
  return pass;
}

// Every row of a pass, as global line indices, checking each row's values.
std::vector<int64_t> RowLines(const Pass& pass) {
  std::vector<int64_t> lines;
  for (const CriteoBatch& batch : pass.batches) {
    EXPECT_EQ(batch.dense.size(), batch.labels.size() * kCriteoDense);
    EXPECT_EQ(batch.sparse.size(), batch.labels.size() * kCriteoSparse);
    EXPECT_EQ(batch.lines.size(), batch.labels.size());
    for (int64_t row = 0; row < batch.size(); ++row) {
      ExpectRowIsLine(batch, row, batch.lines[row]);
      lines.push_back(batch.lines[row]);
    }
  }
  return lines;
}

TEST(CriteoReader, ReadsEveryLineOfEveryFileInOrderInBatches) {
  const std::vector<std::string> paths = {
      WriteLines("order_a.tsv", 0, 5),
      WriteLines("order_b.tsv.gz", 5, 0, /*gzip=*/true),
      WriteLines("order_c.tsv.gz", 5, 7, /*gzip=*/true),
  };
  CriteoReaderOptions options;
  options.batch_size = 4;
  const Pass pass = ReadPass(paths, options);
  ASSERT_TRUE(pass.status.ok()) << pass.status;
  ASSERT_EQ(pass.batches.size(), 3u);
  for (const CriteoBatch& batch : pass.batches) EXPECT_EQ(batch.size(), 4);
  std::vector<int64_t> want(12);
  for (int64_t g = 0; g < 12; ++g) want[g] = g;
  EXPECT_EQ(RowLines(pass), want);
  absl::StatusOr<int64_t> count = CountCriteoLines(paths);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 12);
}

TEST(CriteoReader, ShardsEveryLineToExactlyOneOfOneToThreeWorkers) {
  // Files of uneven sizes, one empty, plain and gzip, LF and CRLF, the last
  // without a final newline: 7 + 1 + 0 + 12 + 5 = 25 lines.
  const std::vector<std::string> paths = {
      WriteLines("shard_0.tsv", 0, 7),
      WriteLines("shard_1.tsv.gz", 7, 1, /*gzip=*/true),
      WriteLines("shard_2.tsv", 8, 0),
      WriteLines("shard_3.tsv.gz", 8, 12, /*gzip=*/true, "\r\n"),
      WriteLines("shard_4.tsv", 20, 5, false, "\n", /*final_eol=*/false),
  };
  constexpr int64_t kLines = 25;
  for (int workers = 1; workers <= 3; ++workers) {
    for (const int64_t batch_size : {1, 3, 100}) {
      std::map<int64_t, int> taken;
      for (int w = 0; w < workers; ++w) {
        CriteoReaderOptions options;
        options.num_workers = workers;
        options.worker_index = w;
        options.batch_size = batch_size;
        const Pass pass = ReadPass(paths, options);
        ASSERT_TRUE(pass.status.ok()) << pass.status;
        const std::vector<int64_t> lines = RowLines(pass);
        // Worker w's lines are its blocks of B, every W-th from the w-th:
        // ShardPlan's order.
        std::vector<int64_t> want;
        for (int64_t g = 0; g < kLines; ++g) {
          if ((g / batch_size) % workers == w) want.push_back(g);
        }
        EXPECT_EQ(lines, want) << workers << " workers, worker " << w;
        for (const int64_t line : lines) ++taken[line];
        // Full batches, except perhaps the last.
        for (size_t b = 0; b + 1 < pass.batches.size(); ++b) {
          EXPECT_EQ(pass.batches[b].size(), batch_size);
        }
      }
      ASSERT_EQ(static_cast<int64_t>(taken.size()), kLines)
          << workers << " workers, batch " << batch_size;
      for (const auto& [line, times] : taken) {
        EXPECT_EQ(times, 1)
            << "line " << line << " with " << workers << " workers";
      }
    }
  }
}

TEST(CriteoReader, BatchesAreShardPlansUnshuffledSteps) {
  // 3 files, 10 + 0 + 13 lines.
  const std::vector<std::string> paths = {
      WriteLines("plan_a.tsv", 0, 10),
      WriteLines("plan_b.tsv", 10, 0),
      WriteLines("plan_c.tsv.gz", 10, 13, /*gzip=*/true),
  };
  absl::StatusOr<int64_t> lines = CountCriteoLines(paths);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(*lines, 23);
  for (int workers = 1; workers <= 3; ++workers) {
    for (const int64_t batch_size : {2, 4, 7}) {
      for (int w = 0; w < workers; ++w) {
        ShardOptions shard;
        shard.num_workers = workers;
        shard.worker_index = w;
        shard.batch_size = batch_size;
        shard.shuffle = false;
        absl::StatusOr<ShardPlan> plan = ShardPlan::Create(*lines, shard);
        ASSERT_TRUE(plan.ok()) << plan.status();
        const std::vector<int64_t> order = plan->WorkerOrder(0);
        CriteoReaderOptions options;
        options.num_workers = workers;
        options.worker_index = w;
        options.batch_size = batch_size;
        const Pass pass = ReadPass(paths, options);
        ASSERT_TRUE(pass.status.ok()) << pass.status;
        // The reader's batches are the plan's steps, except that it has no
        // batch for a trailing step where the plan gives this worker none.
        size_t begin = 0;
        for (int64_t step = 0; step < plan->steps_per_epoch(); ++step) {
          const int64_t size = plan->BatchSize(step);
          if (size == 0) {
            EXPECT_EQ(static_cast<int64_t>(pass.batches.size()), step);
            continue;
          }
          ASSERT_LT(step, static_cast<int64_t>(pass.batches.size()));
          const std::vector<int64_t> want(order.begin() + begin,
                                          order.begin() + begin + size);
          EXPECT_EQ(pass.batches[step].lines, want)
              << workers << " workers, worker " << w << ", batch " << batch_size
              << ", step " << step;
          begin += size;
        }
        EXPECT_EQ(begin, order.size());
      }
    }
  }
}

TEST(CriteoReader, CrlfAndGzipReadAsPlainLf) {
  const std::vector<std::string> variants[] = {
      {WriteLines("eol_lf.tsv", 0, 9)},
      {WriteLines("eol_crlf.tsv", 0, 9, false, "\r\n")},
      {WriteLines("eol_crlf.tsv.gz", 0, 9, true, "\r\n")},
      {WriteLines("eol_crlf_open.tsv", 0, 9, false, "\r\n", false)},
  };
  CriteoReaderOptions options;
  options.batch_size = 4;
  for (const auto& paths : variants) {
    const Pass pass = ReadPass(paths, options);
    ASSERT_TRUE(pass.status.ok()) << pass.status;
    EXPECT_EQ(RowLines(pass), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}))
        << paths[0];
  }
}

// A file of 4 good lines, then a last line cut after 10 columns, without
// a newline (a file truncated while being written).
std::string WriteTruncated(const std::string& name) {
  std::string text;
  for (int64_t g = 0; g < 4; ++g) absl::StrAppend(&text, TestLine(g), "\n");
  const std::string last = TestLine(4);
  size_t cut = 0;
  for (int tabs = 0; tabs < 10; ++cut) tabs += last[cut] == '\t';
  text += last.substr(0, cut - 1);  // 9 tabs: 10 columns.
  const std::string path = TempPath(name);
  WriteFile(path, text);
  return path;
}

TEST(CriteoReader, TruncatedLastLineIsRefusedSayingSo) {
  const std::string path = WriteTruncated("truncated.tsv");
  CriteoReaderOptions options;
  options.batch_size = 2;
  const Pass pass = ReadPass({path}, options);
  EXPECT_EQ(pass.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pass.status.message().find(absl::StrCat(
                "'", path, "': line 5: the line has 10 tab-separated columns")),
            absl::string_view::npos)
      << pass.status;
  EXPECT_NE(pass.status.message().find("no newline: is the file truncated?"),
            absl::string_view::npos)
      << pass.status;
  // The batches before it came out.
  EXPECT_EQ(RowLines(pass), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(CriteoReader, TruncatedLastLineIsSkippedAndCounted) {
  CriteoReaderOptions options;
  options.bad_lines = BadLines::kSkip;
  const Pass pass = ReadPass({WriteTruncated("truncated_skip.tsv")}, options);
  ASSERT_TRUE(pass.status.ok()) << pass.status;
  EXPECT_EQ(RowLines(pass), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(pass.bad_lines, 1);
  EXPECT_NE(pass.first_bad_line.find("line 5"), std::string::npos);
}

// Two files; the second's lines 2 and 4 (global 7 and 9) are malformed and
// a blank line (global 11) too.
std::vector<std::string> WriteWithBadLines() {
  std::string text;
  for (int64_t g = 5; g < 12; ++g) {
    std::string line = TestLine(g);
    if (g == 7) line.replace(line.rfind("abc"), 3, "xyz");
    if (g == 9) line.replace(line.find('\t'), 1, "\t1.5\t");
    if (g == 11) line.clear();
    absl::StrAppend(&text, line, "\n");
  }
  const std::string second = TempPath("bad_b.tsv");
  WriteFile(second, text);
  return {WriteLines("bad_a.tsv", 0, 5), second};
}

TEST(CriteoReader, MalformedLineIsRefusedWithFileLineAndColumn) {
  const std::vector<std::string> paths = WriteWithBadLines();
  CriteoReaderOptions options;
  options.batch_size = 100;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open(paths, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  CriteoBatch batch;
  absl::StatusOr<bool> more = (*reader)->Next(&batch);
  ASSERT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(more.status().message(),
            absl::StrCat("'", paths[1],
                         "': line 3: column 40 (C26): 'xyz' is not a hex "
                         "number"));
  EXPECT_EQ(batch.size(), 0);
  // The reader stays failed.
  EXPECT_EQ((*reader)->Next(&batch).status(), more.status());
}

TEST(CriteoReader, MalformedLinesAreSkippedByTheirOwnerAndCounted) {
  const std::vector<std::string> paths = WriteWithBadLines();
  std::map<int64_t, int> taken;
  int64_t bad = 0;
  for (int w = 0; w < 2; ++w) {
    CriteoReaderOptions options;
    options.num_workers = 2;
    options.worker_index = w;
    options.batch_size = 2;
    options.bad_lines = BadLines::kSkip;
    const Pass pass = ReadPass(paths, options);
    ASSERT_TRUE(pass.status.ok()) << pass.status;
    for (const int64_t line : RowLines(pass)) {
      EXPECT_EQ(line / 2 % 2, w);
      ++taken[line];
    }
    // In blocks of 2: worker 1 owns global lines 7 and 11, worker 0 line 9.
    EXPECT_EQ(pass.bad_lines, w == 1 ? 2 : 1);
    if (w == 1) {
      EXPECT_EQ(pass.first_bad_line,
                absl::StrCat("'", paths[1],
                             "': line 3: column 40 (C26): 'xyz' is not a hex "
                             "number"));
    }
    bad += pass.bad_lines;
  }
  EXPECT_EQ(bad, 3);
  ASSERT_EQ(taken.size(), 9u);
  for (const auto& [line, times] : taken) {
    EXPECT_NE(line, 7);
    EXPECT_NE(line, 9);
    EXPECT_NE(line, 11);
    EXPECT_EQ(times, 1);
  }
}

TEST(CriteoReader, ResumesWhereAnotherReaderStopped) {
  const std::vector<std::string> paths = {
      WriteLines("resume_a.tsv.gz", 0, 10, true),
      WriteLines("resume_b.tsv", 10, 13),
  };
  for (int w = 0; w < 3; ++w) {
    CriteoReaderOptions options;
    options.num_workers = 3;
    options.worker_index = w;
    options.batch_size = 2;
    const std::vector<int64_t> whole = RowLines(ReadPass(paths, options));
    // Stop after 2 batches, then resume in a new reader.
    absl::StatusOr<std::unique_ptr<CriteoReader>> first =
        CriteoReader::Open(paths, options);
    ASSERT_TRUE(first.ok());
    CriteoBatch batch;
    std::vector<int64_t> lines;
    for (int b = 0; b < 2; ++b) {
      ASSERT_TRUE(*(*first)->Next(&batch));
      lines.insert(lines.end(), batch.lines.begin(), batch.lines.end());
      EXPECT_EQ(batch.next_line, (*first)->next_line());
    }
    options.start_line = (*first)->next_line();
    EXPECT_EQ(options.start_line, lines.back() + 1);
    const std::vector<int64_t> rest = RowLines(ReadPass(paths, options));
    lines.insert(lines.end(), rest.begin(), rest.end());
    EXPECT_EQ(lines, whole) << "worker " << w;
  }
}

TEST(CriteoReader, BadOptionsAndMissingFilesAreRefused) {
  const std::string path = WriteLines("opts.tsv", 0, 3);
  CriteoReaderOptions options;
  options.num_workers = 2;
  options.worker_index = 2;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open({path}, options);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("worker_index is 2"),
            absl::string_view::npos);
  options = CriteoReaderOptions();
  options.batch_size = 0;
  EXPECT_EQ(CriteoReader::Open({path}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = CriteoReaderOptions();
  EXPECT_EQ(CriteoReader::Open({}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  reader = CriteoReader::Open({path, TempPath("absent.tsv")}, options);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find("absent.tsv"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
