// Test helpers: small checkpoints written the way the ps tasks and the chief
// write them, for the checkpoint reader and writer tests.
#ifndef PSTRAIN_CHIEF_CHECKPOINT_TEST_UTIL_H_
#define PSTRAIN_CHIEF_CHECKPOINT_TEST_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <system_error>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_writer.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace testing {

// A run with one variable "dense/kernel" [4, 2] and one "dense/bias" [2].
inline TrainingConfig TinyConfig() {
  TrainingConfig config;
  config.set_model_name("tiny");
  VariableDef* kernel = config.add_variables();
  kernel->set_name("dense/kernel");
  kernel->set_dtype(DT_FLOAT);
  kernel->mutable_shape()->add_dims(4);
  kernel->mutable_shape()->add_dims(2);
  VariableDef* bias = config.add_variables();
  bias->set_name("dense/bias");
  bias->set_dtype(DT_FLOAT);
  bias->mutable_shape()->add_dims(2);
  return config;
}

// The value of element i of `name` in the checkpoint of `step`.
inline float TinyValue(const std::string& name, int64_t step, int i) {
  return static_cast<float>(step * 1000 + name.size() * 10 + i) * 0.5f;
}

// Appends rows [begin, end) of `name` (row width `width`) to `file`,
// returning the SavedSlice a ps task would report.
inline SavedSlice AppendSlice(AtomicFile* file, const std::string& file_name,
                              const std::string& name, int64_t begin,
                              int64_t end, int64_t width, int64_t step) {
  std::vector<float> values;
  for (int64_t i = begin * width; i < end * width; ++i) {
    values.push_back(TinyValue(name, step, i));
  }
  const int64_t offset = *file->Append(values.data(), values.size() * 4);
  SavedSlice slice;
  slice.set_name(name);
  slice.mutable_rows()->set_begin(begin);
  slice.mutable_rows()->set_end(end);
  slice.set_file(file_name);
  slice.set_offset(offset);
  slice.set_length(values.size() * 4);
  slice.set_crc32c(Crc32c(values.data(), values.size() * 4));
  slice.set_num_rows(end - begin);
  slice.set_version(step);
  return slice;
}

// Writes model_dir/ckpt-<step> as two ps tasks would (the kernel and its
// Adam slot split by rows, the bias whole on ps 1), with its index unless
// `complete` is false. Returns the directory.
inline std::string WriteTinyCheckpoint(const std::string& model_dir,
                                       int64_t step, bool complete = true) {
  const std::string dir = CheckpointDir(model_dir, step);
  EXPECT_TRUE(MakeDirectories(dir).ok());
  std::vector<SavedSlice> slices;
  for (int task = 0; task < 2; ++task) {
    const std::string file_name = absl::StrCat("ps-", task, ".data");
    std::unique_ptr<AtomicFile> file =
        *AtomicFile::Create(absl::StrCat(dir, "/", file_name));
    const int64_t begin = task * 2, end = begin + 2;
    // Reported in an order other than the rows', as a real save may be.
    slices.insert(slices.begin(),
                  AppendSlice(file.get(), file_name, "dense/kernel", begin, end,
                              2, step));
    slices.push_back(AppendSlice(file.get(), file_name, "dense/kernel/adam_m",
                                 begin, end, 2, step));
    if (task == 1) {
      slices.push_back(
          AppendSlice(file.get(), file_name, "dense/bias", 0, 2, 1, step));
    }
    EXPECT_TRUE(file->Commit().ok());
  }
  if (complete) {
    CheckpointInfo info;
    info.run_id = "run-test";
    info.step = step;
    info.epoch = step / 10;
    info.config = TinyConfig();
    absl::StatusOr<CheckpointIndex> index = BuildCheckpointIndex(info, slices);
    EXPECT_TRUE(index.ok()) << index.status();
    EXPECT_TRUE(WriteCheckpointIndex(dir, *index).ok());
  }
  return dir;
}

// Flips one bit of byte `offset` of `path`.
inline void FlipByte(const std::string& path, int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char c = 0;
  file.read(&c, 1);
  c ^= 0x10;
  file.seekp(offset);
  file.write(&c, 1);
}

// A fresh directory under the test's scratch space.
inline std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

}  // namespace testing
}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_TEST_UTIL_H_
