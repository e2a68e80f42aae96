#include "data/criteo_prefetcher.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo_line.h"
#include "data/test_files.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// `count` lines with I1 = line index; line `bad` (if >= 0) malformed.
std::string WriteLines(const std::string& name, int count, int bad = -1) {
  std::string text;
  for (int g = 0; g < count; ++g) {
    std::vector<std::string> columns(kCriteoColumns);
    columns[0] = g == bad ? "7" : "1";
    columns[1] = absl::StrCat(g);
    absl::StrAppend(&text, absl::StrJoin(columns, "\t"), "\n");
  }
  const std::string path = TempPath(name);
  WriteFile(path, text);
  return path;
}

std::unique_ptr<CriteoPrefetcher> StartOn(const std::string& path,
                                          int64_t batch_size,
                                          int queue_depth = 2) {
  CriteoReaderOptions options;
  options.batch_size = batch_size;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open({path}, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<CriteoPrefetcher>> prefetcher =
      CriteoPrefetcher::Start(*std::move(reader), queue_depth);
  EXPECT_TRUE(prefetcher.ok()) << prefetcher.status();
  return prefetcher.ok() ? *std::move(prefetcher) : nullptr;
}

TEST(CriteoPrefetcher, HandsOutTheReadersBatchesInOrderThenNull) {
  std::unique_ptr<CriteoPrefetcher> batches =
      StartOn(WriteLines("prefetch_all.tsv", 103), 10);
  ASSERT_NE(batches, nullptr);
  std::vector<int64_t> lines;
  int count = 0;
  for (;;) {
    absl::StatusOr<CriteoBatch*> batch = batches->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (*batch == nullptr) break;
    ++count;
    EXPECT_EQ((*batch)->size(), count <= 10 ? 10 : 3);
    EXPECT_EQ((*batch)->next_line, (*batch)->lines.back() + 1);
    lines.insert(lines.end(), (*batch)->lines.begin(), (*batch)->lines.end());
    batches->Release(*batch);
  }
  EXPECT_EQ(count, 11);
  ASSERT_EQ(lines.size(), 103u);
  for (int64_t g = 0; g < 103; ++g) EXPECT_EQ(lines[g], g);
  absl::StatusOr<CriteoBatch*> after = batches->Next();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, nullptr);
}

TEST(CriteoPrefetcher, ReportsTheReadersErrorAfterTheBatchesBeforeIt) {
  const std::string path = WriteLines("prefetch_bad.tsv", 50, 25);
  std::unique_ptr<CriteoPrefetcher> batches = StartOn(path, 10);
  ASSERT_NE(batches, nullptr);
  int good = 0;
  absl::Status error;
  for (;;) {
    absl::StatusOr<CriteoBatch*> batch = batches->Next();
    if (!batch.ok()) {
      error = batch.status();
      break;
    }
    ASSERT_NE(*batch, nullptr) << "the pass ended without the error";
    ++good;
    batches->Release(*batch);
  }
  EXPECT_EQ(good, 2);  // Lines 0..19; line 25 is in the third batch.
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(error.message().find(absl::StrCat("'", path, "': line 26")),
            absl::string_view::npos)
      << error;
  EXPECT_EQ(batches->Next().status(), error);
}

TEST(CriteoPrefetcher, HoldingEveryBufferIsAnErrorNotADeadlock) {
  std::unique_ptr<CriteoPrefetcher> batches =
      StartOn(WriteLines("prefetch_hold.tsv", 100), 5, /*queue_depth=*/1);
  ASSERT_NE(batches, nullptr);
  std::vector<CriteoBatch*> held;
  for (int i = 0; i < 3; ++i) {  // queue_depth + 2 buffers.
    absl::StatusOr<CriteoBatch*> batch = batches->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_NE(*batch, nullptr);
    held.push_back(*batch);
  }
  absl::StatusOr<CriteoBatch*> more = batches->Next();
  EXPECT_EQ(more.status().code(), absl::StatusCode::kFailedPrecondition);
  batches->Release(held[0]);
  more = batches->Next();
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_NE(*more, nullptr);
  EXPECT_EQ((*more)->lines.front(), 15);
}

TEST(CriteoPrefetcher, StopsWithBatchesUnconsumed) {
  std::unique_ptr<CriteoPrefetcher> batches =
      StartOn(WriteLines("prefetch_stop.tsv", 1000), 3);
  ASSERT_NE(batches, nullptr);
  absl::StatusOr<CriteoBatch*> batch = batches->Next();
  ASSERT_TRUE(batch.ok());
  batches.reset();  // Joins the thread, which waits for a free buffer.
}

TEST(CriteoPrefetcher, RefusesBadArguments) {
  EXPECT_EQ(CriteoPrefetcher::Start(nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  CriteoReaderOptions options;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open({WriteLines("prefetch_args.tsv", 3)}, options);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(CriteoPrefetcher::Start(*std::move(reader), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
