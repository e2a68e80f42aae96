#include "chief/checkpoint_reader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "chief/checkpoint_test_util.h"
#include "chief/checkpoint_writer.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using testing::FlipByte;
using testing::FreshDir;
using testing::TinyValue;
using testing::WriteTinyCheckpoint;

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

TEST(CheckpointReader, DirectoryWithoutIndexIsIgnored) {
  const std::string model_dir = FreshDir("incomplete");
  WriteTinyCheckpoint(model_dir, 10);
  WriteTinyCheckpoint(model_dir, 20, /*complete=*/false);
  const std::vector<CheckpointRef> found = ListCompleteCheckpoints(model_dir);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].step, 10);
  absl::StatusOr<LoadedCheckpoint> latest =
      FindLatestGoodCheckpoint(model_dir, [](absl::string_view) {});
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->index.step(), 10);
}

TEST(CheckpointReader, NoCheckpointIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(
      FindLatestGoodCheckpoint(FreshDir("empty"), [](absl::string_view) {})
          .status()));
  EXPECT_TRUE(ListCompleteCheckpoints("/nonexistent/dir").empty());
}

TEST(CheckpointReader, ReadVariablesAssemblesRowSlices) {
  const std::string model_dir = FreshDir("assemble");
  const std::string dir = WriteTinyCheckpoint(model_dir, 30);
  absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(dir);
  ASSERT_TRUE(index.ok()) << index.status();
  absl::StatusOr<std::vector<WholeVariable>> vars =
      ReadVariables(dir, *index, /*with_slots=*/false);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->size(), 2u);  // config order, no slots
  EXPECT_EQ((*vars)[0].name, "dense/kernel");
  EXPECT_EQ((*vars)[0].shape, (std::vector<int64_t>{4, 2}));
  const std::vector<float> kernel = Floats((*vars)[0].data);
  ASSERT_EQ(kernel.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(kernel[i], TinyValue("dense/kernel", 30, i)) << i;
  }
  EXPECT_EQ((*vars)[1].name, "dense/bias");
  EXPECT_EQ(Floats((*vars)[1].data),
            (std::vector<float>{TinyValue("dense/bias", 30, 0),
                                TinyValue("dense/bias", 30, 1)}));
  absl::StatusOr<std::vector<WholeVariable>> with_slots =
      ReadVariables(dir, *index, /*with_slots=*/true);
  ASSERT_TRUE(with_slots.ok()) << with_slots.status();
  ASSERT_EQ(with_slots->size(), 3u);
  EXPECT_EQ((*with_slots)[1].name, "dense/kernel/adam_m");
}

TEST(CheckpointReader, CrcMismatchIsDataLoss) {
  const std::string model_dir = FreshDir("crc");
  const std::string dir = WriteTinyCheckpoint(model_dir, 10);
  FlipByte(dir + "/ps-1.data", 3);
  absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(dir);
  ASSERT_TRUE(index.ok());
  const absl::Status status = VerifyCheckpointData(dir, *index);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("CRC32C mismatch in " + dir + "/ps-1.data"),
            std::string::npos)
      << status;
  EXPECT_EQ(ReadVariables(dir, *index, false).status().code(),
            absl::StatusCode::kDataLoss);
}

// The evaluator reads checkpoints the chief may prune meanwhile: one gone
// by the time its read fails is skipped; a damaged one still there is an
// error.
TEST(CheckpointReader, ACheckpointPrunedWhileReadIsSkippedNotAnError) {
  const std::string model_dir = FreshDir("pruned");
  const std::string dir = WriteTinyCheckpoint(model_dir, 10);
  absl::StatusOr<std::optional<ReadCheckpoint>> read =
      ReadCheckpointUnlessPruned(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->variables.size(), 2u);
  EXPECT_EQ((*read)->index.step(), 10);

  FlipByte(dir + "/ps-1.data", 3);
  EXPECT_EQ(ReadCheckpointUnlessPruned(dir).status().code(),
            absl::StatusCode::kDataLoss);

  std::filesystem::remove_all(dir);
  read = ReadCheckpointUnlessPruned(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->has_value());
}

TEST(CheckpointReader, DamagedNewestFallsBackToThePreviousOne) {
  const std::string model_dir = FreshDir("fallback");
  WriteTinyCheckpoint(model_dir, 10);
  const std::string damaged_data = WriteTinyCheckpoint(model_dir, 20);
  const std::string damaged_index = WriteTinyCheckpoint(model_dir, 30);
  FlipByte(damaged_data + "/ps-0.data", 0);
  std::ofstream(damaged_index + "/index.pb", std::ios::trunc) << "garbage!";
  std::vector<std::string> lines;
  absl::StatusOr<LoadedCheckpoint> latest = FindLatestGoodCheckpoint(
      model_dir, [&](absl::string_view line) { lines.emplace_back(line); });
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->index.step(), 10);
  EXPECT_EQ(latest->dir, model_dir + "/ckpt-10");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("ckpt-30 is damaged"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("does not parse"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("ckpt-20 is damaged"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("falling back to the previous one"),
            std::string::npos);
}

TEST(CheckpointReader, GrowingTableComesInIdOrderWithItsIds) {
  const std::string model_dir = FreshDir("growing");
  const std::string dir = CheckpointDir(model_dir, 5);
  ASSERT_TRUE(MakeDirectories(dir).ok());
  CheckpointInfo info;
  info.step = 5;
  VariableDef* def = info.config.add_variables();
  def->set_name("emb/embeddings");
  def->set_dtype(DT_FLOAT);
  def->mutable_shape()->add_dims(0);
  def->mutable_shape()->add_dims(2);
  std::vector<SavedSlice> slices;
  const std::vector<std::vector<int64_t>> ids_by_task = {{5, 1}, {3}};
  for (int task = 0; task < 2; ++task) {
    const std::string file_name = absl::StrCat("ps-", task, ".data");
    std::unique_ptr<AtomicFile> file =
        *AtomicFile::Create(absl::StrCat(dir, "/", file_name));
    const std::vector<int64_t>& ids = ids_by_task[task];
    std::vector<float> rows;
    for (int64_t id : ids) {
      rows.push_back(id * 10.0f);
      rows.push_back(id * 10.0f + 1);
    }
    SavedSlice slice;
    slice.set_name("emb/embeddings");
    slice.set_file(file_name);
    slice.set_ids_offset(*file->Append(ids.data(), ids.size() * 8));
    slice.set_ids_crc32c(Crc32c(ids.data(), ids.size() * 8));
    slice.set_offset(*file->Append(rows.data(), rows.size() * 4));
    slice.set_length(rows.size() * 4);
    slice.set_crc32c(Crc32c(rows.data(), rows.size() * 4));
    slice.set_num_rows(ids.size());
    slices.push_back(slice);
    ASSERT_TRUE(file->Commit().ok());
  }
  absl::StatusOr<CheckpointIndex> index = BuildCheckpointIndex(info, slices);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(VerifyCheckpointData(dir, *index).ok());
  absl::StatusOr<std::vector<WholeVariable>> vars =
      ReadVariables(dir, *index, /*with_slots=*/false);
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->size(), 2u);
  EXPECT_EQ((*vars)[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Floats((*vars)[0].data),
            (std::vector<float>{10, 11, 30, 31, 50, 51}));
  EXPECT_EQ((*vars)[1].name, "emb/embeddings/ids");
  EXPECT_EQ((*vars)[1].dtype, DT_INT64);
  std::vector<int64_t> ids(3);
  ASSERT_EQ((*vars)[1].data.size(), 24u);
  std::memcpy(ids.data(), (*vars)[1].data.data(), 24);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 3, 5}));
  // Restore gets the ids back where the ps wrote them.
  const std::vector<SavedSlice> saved = ToSavedSlices(*index);
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].ids_offset(), slices[0].ids_offset());
  EXPECT_EQ(saved[0].ids_crc32c(), slices[0].ids_crc32c());
}

TEST(CheckpointReader, UnknownFormatVersionIsRefused) {
  const std::string dir = FreshDir("format");
  CheckpointIndex index;
  index.set_format_version(2);
  ASSERT_TRUE(WriteCheckpointIndex(dir, index).ok());
  EXPECT_EQ(ReadCheckpointIndex(dir).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
