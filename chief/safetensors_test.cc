#include "chief/safetensors.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace chief {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

WholeVariable Floats(std::string name, std::vector<int64_t> shape,
                     std::vector<float> values) {
  WholeVariable v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.data.assign(reinterpret_cast<const char*>(values.data()),
                values.size() * sizeof(float));
  return v;
}

TEST(Safetensors, BytesParseAsHeaderThenData) {
  const std::vector<WholeVariable> tensors = {
      Floats("dense/kernel", {2, 3}, {1, 2, 3, 4, 5, 6}),
      Floats("dense/bias", {3}, {-1, 0.5, 7})};
  absl::StatusOr<std::string> bytes = SafetensorsBytes(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GE(bytes->size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>((*bytes)[i]);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes->size(), 8 + n + 36);
  const std::string header = bytes->substr(8, n);
  const nlohmann::json json = nlohmann::json::parse(header, nullptr, false);
  ASSERT_TRUE(json.is_object()) << header;
  EXPECT_EQ(json["__metadata__"]["format"], "pt");
  EXPECT_EQ(json["dense/kernel"]["dtype"], "F32");
  EXPECT_EQ(json["dense/kernel"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(json["dense/kernel"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(json["dense/bias"]["shape"], nlohmann::json({3}));
  EXPECT_EQ(json["dense/bias"]["data_offsets"], nlohmann::json({24, 36}));
  float bias[3];
  std::memcpy(bias, bytes->data() + 8 + n + 24, sizeof(bias));
  EXPECT_EQ(bias[0], -1);
  EXPECT_EQ(bias[1], 0.5);
  EXPECT_EQ(bias[2], 7);
  float first;
  std::memcpy(&first, bytes->data() + 8 + n, sizeof(first));
  EXPECT_EQ(first, 1);
}

TEST(Safetensors, NamesAreJsonEscaped) {
  absl::StatusOr<std::string> bytes =
      SafetensorsBytes({Floats("a\"b\\c", {1}, {1})});
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>((*bytes)[i]);
  const nlohmann::json json =
      nlohmann::json::parse(bytes->substr(8, n), nullptr, false);
  ASSERT_TRUE(json.is_object());
  EXPECT_TRUE(json.contains("a\"b\\c"));
}

TEST(Safetensors, SizeNotMatchingTheShapeIsRefused) {
  EXPECT_EQ(SafetensorsBytes({Floats("x", {2, 2}, {1, 2, 3})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Safetensors, WriteReplacesAnEarlierExportOnly) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir + "/model.safetensors";
  const WholeVariable w = Floats("w", {2}, {1, 2});
  ASSERT_TRUE(WriteSafetensors(path, {w}).ok());
  const WholeVariable v = Floats("v", {1}, {3});
  ASSERT_TRUE(WriteSafetensors(path, {v}).ok());  // an export: replaced
  EXPECT_EQ(ReadAll(path), *SafetensorsBytes({v}));

  // A checkpoint's index, a short file, a directory: left as they are.
  const std::string index = dir + "/index.pb";
  std::ofstream(index, std::ios::binary)
      << std::string("\x08\x01\x12\x04ckpt", 8);
  const std::string tiny = dir + "/tiny";
  std::ofstream(tiny, std::ios::binary) << "{}";
  for (const std::string& other : {index, tiny, dir}) {
    const std::string before = other == dir ? "" : ReadAll(other);
    const absl::Status status = WriteSafetensors(other, {v});
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << other;
    EXPECT_NE(status.message().find(other + " exists and is "),
              std::string::npos)
        << status;
    if (other != dir) EXPECT_EQ(ReadAll(other), before);
  }
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
