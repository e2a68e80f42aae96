#include "compute/precision.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {
namespace {

TEST(PrecisionTest, NamesParseBack) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    absl::StatusOr<Precision> parsed = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_EQ(PrecisionName(Precision::kFp32), "fp32");
}

TEST(PrecisionTest, EmptyIsFp32) {
  absl::StatusOr<Precision> parsed = ParsePrecision("");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Precision::kFp32);
}

TEST(PrecisionTest, UnknownNamesTheValue) {
  for (const char* bad : {"fp16", "BF16", "float32", "bf16 "}) {
    absl::StatusOr<Precision> parsed = ParsePrecision(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(absl::StrCat("\"", bad, "\"")),
              absl::string_view::npos)
        << parsed.status();
    EXPECT_NE(parsed.status().message().find("fp32 or bf16"),
              absl::string_view::npos);
  }
}

// The chief writes the name into TrainingConfig; a worker reads the config
// off the wire and parses it back.
TEST(PrecisionTest, RoundTripThroughTrainingConfig) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    TrainingConfig config;
    config.set_precision(std::string(PrecisionName(p)));
    const std::string wire = config.SerializeAsString();
    TrainingConfig received;
    ASSERT_TRUE(received.ParseFromString(wire));
    absl::StatusOr<Precision> parsed = ParsePrecision(received.precision());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  // A config from before the field: fp32.
  TrainingConfig old;
  TrainingConfig received;
  ASSERT_TRUE(received.ParseFromString(old.SerializeAsString()));
  EXPECT_EQ(*ParsePrecision(received.precision()), Precision::kFp32);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
