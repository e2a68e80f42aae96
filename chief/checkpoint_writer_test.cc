#include "chief/checkpoint_writer.h"

#include <filesystem>

#include "chief/checkpoint_reader.h"
#include "chief/checkpoint_test_util.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using testing::FreshDir;
using testing::TinyConfig;
using testing::WriteTinyCheckpoint;

TEST(CheckpointWriter, IndexNamesEveryVariableAndSlotWithItsShape) {
  const std::string model_dir = FreshDir("index_shapes");
  const std::string dir = WriteTinyCheckpoint(model_dir, 10);
  absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(dir);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->format_version(), kCheckpointFormatVersion);
  EXPECT_EQ(index->run_id(), "run-test");
  EXPECT_EQ(index->step(), 10);
  EXPECT_EQ(index->epoch(), 1);
  ASSERT_EQ(index->variables_size(), 3);
  // In name order.
  EXPECT_EQ(index->variables(0).name(), "dense/bias");
  EXPECT_EQ(index->variables(1).name(), "dense/kernel");
  EXPECT_EQ(index->variables(2).name(), "dense/kernel/adam_m");
  const CheckpointVariable& slot = index->variables(2);
  ASSERT_EQ(slot.shape().dims_size(), 2);
  EXPECT_EQ(slot.shape().dims(0), 4);
  EXPECT_EQ(slot.shape().dims(1), 2);
  EXPECT_EQ(slot.dtype(), DT_FLOAT);
  EXPECT_EQ(slot.version(), 10);
  // Slices in row order, whatever order the ps tasks reported them in.
  const CheckpointVariable& kernel = index->variables(1);
  ASSERT_EQ(kernel.slices_size(), 2);
  EXPECT_EQ(kernel.slices(0).rows().begin(), 0);
  EXPECT_EQ(kernel.slices(0).values().file(), "ps-0.data");
  EXPECT_EQ(kernel.slices(1).rows().begin(), 2);
  EXPECT_EQ(kernel.slices(1).values().file(), "ps-1.data");
  EXPECT_EQ(kernel.slices(1).values().length(), 16);
}

// A growing table's lifecycle data (SavedSlice.dtype and row_width set) is
// indexed as [0, 2] int64 with its ids, and reads back as a slot.
TEST(CheckpointWriter, LifecycleArraysAreIndexedWithTheirOwnTypeAndWidth) {
  const std::string dir = FreshDir("lifecycle_index");
  CheckpointInfo info;
  info.run_id = "run-test";
  info.step = 3;
  VariableDef* table = info.config.add_variables();
  table->set_name("emb");
  table->set_dtype(DT_FLOAT);
  table->set_sparse(true);
  table->mutable_shape()->add_dims(0);
  table->mutable_shape()->add_dims(2);
  // ps-0.data: ids {5, 9}, their rows (2 x 2 floats), their (count,
  // version) pairs.
  const int64_t ids[] = {5, 9};
  const float rows[] = {1, 2, 3, 4};
  const int64_t pairs[] = {3, 2, 7, 3};
  std::string data(reinterpret_cast<const char*>(ids), sizeof(ids));
  data.append(reinterpret_cast<const char*>(rows), sizeof(rows));
  data.append(reinterpret_cast<const char*>(pairs), sizeof(pairs));
  ASSERT_TRUE(WriteFileAtomically(dir + "/ps-0.data", data).ok());
  auto slice = [&](const std::string& name, int64_t offset, int64_t length) {
    SavedSlice s;
    s.set_name(name);
    s.set_file("ps-0.data");
    s.set_offset(offset);
    s.set_length(length);
    s.set_crc32c(Crc32c(data.data() + offset, length));
    s.set_num_rows(2);
    s.set_version(3);
    s.set_ids_offset(0);
    s.set_ids_crc32c(Crc32c(data.data(), sizeof(ids)));
    return s;
  };
  std::vector<SavedSlice> slices = {slice("emb", 16, 16),
                                    slice("emb/lifecycle", 32, 32)};
  slices[1].set_dtype(DT_INT64);
  slices[1].set_row_width(2);
  absl::StatusOr<CheckpointIndex> index = BuildCheckpointIndex(info, slices);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->variables_size(), 2);
  const CheckpointVariable& lifecycle = index->variables(1);
  EXPECT_EQ(lifecycle.name(), "emb/lifecycle");
  EXPECT_EQ(lifecycle.dtype(), DT_INT64);
  ASSERT_EQ(lifecycle.shape().dims_size(), 2);
  EXPECT_EQ(lifecycle.shape().dims(0), 0);
  EXPECT_EQ(lifecycle.shape().dims(1), 2);
  EXPECT_EQ(lifecycle.slices(0).ids().length(), 16);
  absl::StatusOr<std::vector<WholeVariable>> read =
      ReadVariables(dir, *index, /*with_slots=*/true);
  ASSERT_TRUE(read.ok()) << read.status();
  bool found = false;
  for (const WholeVariable& v : *read) {
    if (v.name != "emb/lifecycle") continue;
    found = true;
    EXPECT_EQ(v.dtype, DT_INT64);
    EXPECT_EQ(v.shape, std::vector<int64_t>({2, 2}));
    EXPECT_EQ(v.data,
              std::string(reinterpret_cast<const char*>(pairs), sizeof(pairs)));
  }
  EXPECT_TRUE(found);
}

TEST(CheckpointWriter, IndexRoundTripsThroughTheFile) {
  CheckpointInfo info;
  info.run_id = "run-x";
  info.step = 7;
  info.config = TinyConfig();
  info.placement.set_num_ps(2);
  SavedSlice slice;
  slice.set_name("dense/bias");
  slice.mutable_rows()->set_end(2);
  slice.set_file("ps-0.data");
  slice.set_length(8);
  slice.set_crc32c(1234);
  slice.set_version(7);
  absl::StatusOr<CheckpointIndex> index = BuildCheckpointIndex(info, {slice});
  ASSERT_TRUE(index.ok()) << index.status();
  const std::string dir = FreshDir("round_trip");
  ASSERT_TRUE(WriteCheckpointIndex(dir, *index).ok());
  absl::StatusOr<CheckpointIndex> read = ReadCheckpointIndex(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), index->SerializeAsString());
  // And back to what the ps tasks' Restore takes.
  const std::vector<SavedSlice> slices = ToSavedSlices(*read);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].SerializeAsString(), slice.SerializeAsString());
}

TEST(CheckpointWriter, SliceOfNoVariableIsRefused) {
  CheckpointInfo info;
  info.config = TinyConfig();
  SavedSlice slice;
  slice.set_name("conv/kernel");
  EXPECT_EQ(BuildCheckpointIndex(info, {slice}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointWriter, PruneKeepsTheNewestCompleteCheckpoints) {
  const std::string model_dir = FreshDir("prune");
  for (int step : {10, 20, 30, 40}) WriteTinyCheckpoint(model_dir, step);
  WriteTinyCheckpoint(model_dir, 5, /*complete=*/false);
  WriteTinyCheckpoint(model_dir, 50, /*complete=*/false);
  ASSERT_TRUE(PruneCheckpoints(model_dir, 2).ok());
  const std::vector<CheckpointRef> left = ListCompleteCheckpoints(model_dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].step, 40);
  EXPECT_EQ(left[1].step, 30);
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/ckpt-20"));
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/ckpt-10"));
  // An old incomplete one goes; a newer one (maybe being written) stays.
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/ckpt-5"));
  EXPECT_TRUE(std::filesystem::exists(model_dir + "/ckpt-50"));
}

// A directory that only looks like a leftover, its step past int64 (once
// an abort in std::stoll), is left alone.
TEST(CheckpointWriter, PruneLeavesStrayNamesAlone) {
  const std::string model_dir = FreshDir("prune-stray");
  for (int step : {10, 20}) WriteTinyCheckpoint(model_dir, step);
  const std::string stray = model_dir + "/ckpt-99999999999999999999.tmp-1";
  std::filesystem::create_directories(stray);
  std::filesystem::create_directories(model_dir + "/ckpt-99999999999999999999");
  ASSERT_TRUE(PruneCheckpoints(model_dir, 1).ok());
  EXPECT_TRUE(std::filesystem::exists(stray));
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/ckpt-10"));
  EXPECT_TRUE(std::filesystem::exists(model_dir + "/ckpt-20"));
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
