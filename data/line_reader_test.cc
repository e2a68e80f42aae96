#include "data/line_reader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/test_files.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

struct Lines {
  std::vector<std::string> lines;
  std::vector<bool> terminated;
};

absl::StatusOr<Lines> ReadAll(
    const std::string& path,
    int64_t max_line_bytes = LineReader::kDefaultMaxLineBytes) {
  absl::StatusOr<std::unique_ptr<LineReader>> reader =
      LineReader::Open(path, max_line_bytes);
  if (!reader.ok()) return reader.status();
  Lines out;
  absl::string_view line;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.lines.emplace_back(line);
    out.terminated.push_back((*reader)->terminated());
    EXPECT_EQ((*reader)->line_number(), static_cast<int64_t>(out.lines.size()));
  }
  return out;
}

TEST(LineReader, SplitsAtNewlinesAndKeepsCarriageReturns) {
  const std::string path = TempPath("plain.txt");
  WriteFile(path, "a\tb\r\n\nlast");
  absl::StatusOr<Lines> got = ReadAll(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->lines, (std::vector<std::string>{"a\tb\r", "", "last"}));
  EXPECT_EQ(got->terminated, (std::vector<bool>{true, true, false}));
}

TEST(LineReader, FinalNewlineMakesNoEmptyLine) {
  const std::string path = TempPath("final.txt");
  WriteFile(path, "x\ny\n");
  absl::StatusOr<Lines> got = ReadAll(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->lines, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(got->terminated, (std::vector<bool>{true, true}));
}

TEST(LineReader, EmptyFileHasNoLines) {
  const std::string path = TempPath("empty.txt");
  WriteFile(path, "");
  absl::StatusOr<Lines> got = ReadAll(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->lines.empty());
}

// Lines of many lengths, some far longer than the 1 MiB read size, so that
// lines straddle every kind of buffer boundary.
std::vector<std::string> VariedLines() {
  std::vector<std::string> lines;
  for (int i = 0; i < 4000; ++i) {
    const size_t length = i % 997 == 3 ? 700000 + i : (i * 37) % 1500;
    lines.push_back(std::string(length, static_cast<char>('a' + i % 26)));
  }
  return lines;
}

TEST(LineReader, GzipReadsAsThePlainFileDoesAcrossBufferBoundaries) {
  const std::vector<std::string> lines = VariedLines();
  std::string text;
  for (const std::string& line : lines) absl::StrAppend(&text, line, "\n");
  const std::string plain = TempPath("varied.txt");
  const std::string gz = TempPath("varied.txt.gz");
  WriteFile(plain, text);
  // Two gzip members, as `cat a.gz b.gz` writes: one stream.
  const size_t half = text.size() / 2;
  WriteFile(gz, Gzip(text.substr(0, half)) + Gzip(text.substr(half)));
  for (const std::string& path : {plain, gz}) {
    absl::StatusOr<Lines> got = ReadAll(path);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->lines.size(), lines.size()) << path;
    for (size_t i = 0; i < lines.size(); ++i) {
      ASSERT_EQ(got->lines[i], lines[i]) << path << " line " << i + 1;
    }
  }
  absl::StatusOr<std::unique_ptr<LineReader>> reader = LineReader::Open(gz);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE((*reader)->gzipped());
  reader = LineReader::Open(plain);
  ASSERT_TRUE(reader.ok());
  EXPECT_FALSE((*reader)->gzipped());
}

TEST(LineReader, TruncatedGzipIsDataLossNamingTheFile) {
  std::string text;
  for (int i = 0; i < 200000; ++i) absl::StrAppend(&text, i, "\t", i * 7, "\n");
  const std::string gz = Gzip(text);
  const std::string path = TempPath("cut.tsv.gz");
  WriteFile(path, gz.substr(0, gz.size() / 2));
  absl::StatusOr<Lines> got = ReadAll(path);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_NE(got.status().message().find(path), absl::string_view::npos);
  EXPECT_NE(got.status().message().find("after line"), absl::string_view::npos);
}

TEST(LineReader, LineLongerThanTheLimitIsRefused) {
  const std::string path = TempPath("long.txt");
  WriteFile(path, "short\n" + std::string(5000, 'x') + "\nafter\n");
  absl::StatusOr<Lines> got = ReadAll(path, 4096);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("line 2 is longer than 4096"),
            absl::string_view::npos)
      << got.status();
  EXPECT_TRUE(ReadAll(path, 5000).ok());
}

TEST(LineReader, MissingFileIsNotFound) {
  absl::StatusOr<Lines> got = ReadAll(TempPath("no-such-file.tsv"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("no-such-file.tsv"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
