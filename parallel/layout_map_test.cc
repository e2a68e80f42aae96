#include "parallel/layout_map.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace parallel {
namespace {

VariableDef Variable(const std::string& name, std::vector<int64_t> dims) {
  VariableDef def;
  def.set_name(name);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  return def;
}

std::vector<VariableDef> Mlp() {
  return {Variable("d1/kernel", {784, 200}), Variable("d1/bias", {200}),
          Variable("d2/kernel", {200, 10}), Variable("d2/bias", {10})};
}

TEST(LayoutMap, KerasFormSplitsNamedDimensionsAndReplicatesTheRest) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(
      R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})");
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(Mlp(), 2);
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 4u);
  EXPECT_EQ(splits->at("d1/kernel").split_dim, 1);
  EXPECT_EQ(splits->at("d1/kernel").shape, (std::vector<int64_t>{784, 200}));
  EXPECT_EQ(splits->at("d1/bias").split_dim, 0);
  EXPECT_FALSE(splits->at("d2/kernel").split());
  EXPECT_FALSE(splits->at("d2/bias").split());
}

TEST(LayoutMap, KeysMatchWholePathsAndTheFirstInFileOrderWins) {
  // "d" alone matches no path whole; "d.*/kernel" comes before
  // "d2/kernel" in the file, although a sorted map would put it after.
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(
      R"({"d": ["model"], "d2/kernel": ["model", null],
          "d.*/kernel": [null, "model"]})");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->MatchingKey("d2/kernel"), "d2/kernel");
  EXPECT_EQ(map->MatchingKey("d1/kernel"), "d.*/kernel");
  EXPECT_EQ(map->MatchingKey("d1/bias"), std::nullopt);
  EXPECT_EQ(map->MatchingKey("xd1/kernel"), std::nullopt);

  absl::StatusOr<LayoutMap> first = LayoutMap::Parse(
      R"({"d.*/kernel": [null, "model"], "d2/kernel": ["model", null]})");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<VariableSplits> splits = first->Resolve(Mlp(), 2);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->at("d2/kernel").split_dim, 1);
}

TEST(LayoutMap, AVeryLongPathIsMatched) {
  // std::regex overflowed its stack here (common/pattern.h).
  absl::StatusOr<LayoutMap> map =
      LayoutMap::Parse(R"({".*/kernel": [null, "model"]})");
  ASSERT_TRUE(map.ok()) << map.status();
  const std::string path = std::string(100000, 'd') + "/kernel";
  EXPECT_EQ(map->MatchingKey(path), ".*/kernel");
}

TEST(LayoutMap, NullLayoutAndShortLayoutAreAllowed) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(
      R"({"d1/kernel": ["model"], "d2/kernel": [null, null]})");
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(Mlp(), 4);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->at("d1/kernel").split_dim, 0);
  EXPECT_FALSE(splits->at("d2/kernel").split());
}

void ExpectParseRefused(const std::string& json, const std::string& words) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(json);
  ASSERT_FALSE(map.ok()) << json;
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(map.status().message().find(words), absl::string_view::npos)
      << map.status();
}

TEST(LayoutMap, ParseRefusesBadLayoutsNamingTheKey) {
  ExpectParseRefused(R"({"d1/kernel": [null, "tensor"]})",
                     "key 'd1/kernel': dimension 1: unknown axis 'tensor'");
  ExpectParseRefused(R"({"d1/kernel": ["data", null]})",
                     "key 'd1/kernel': dimension 0: axis 'data' splits "
                     "batches");
  ExpectParseRefused(R"({"d1/kernel": ["model", "model"]})",
                     "key 'd1/kernel': axis 'model' splits dimensions 0 and 1");
  ExpectParseRefused(R"({"d1/kernel": "model"})",
                     "key 'd1/kernel': expected an array");
  ExpectParseRefused(R"({"d1/kernel": [1]})",
                     "key 'd1/kernel': dimension 0: expected null or an axis");
  ExpectParseRefused(R"({"d1/(kernel": ["model"]})",
                     "key 'd1/(kernel': invalid regular expression");
  ExpectParseRefused(R"(["d1/kernel"])", "expected a JSON object");
  ExpectParseRefused(R"({"d1/kernel": )", "parse error");
  // Deeper than the error's dump() of it could go (common/json_util.h).
  ExpectParseRefused(std::string(100000, '[') + std::string(100000, ']'),
                     "layout_map: JSON nested more than 256 levels deep");
}

void ExpectResolveRefused(const std::string& json, int model_size,
                          const std::string& words) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(json);
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(Mlp(), model_size);
  ASSERT_FALSE(splits.ok()) << json;
  EXPECT_EQ(splits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(splits.status().message().find(words), absl::string_view::npos)
      << splits.status();
}

TEST(LayoutMap, ResolveRefusesWhatTheVariableCannotTakeNamingIt) {
  ExpectResolveRefused(R"({"d1/bias": [null, "model"]})", 2,
                       "key 'd1/bias' gives variable 'd1/bias' a layout of 2 "
                       "dimensions, but it has rank 1");
  ExpectResolveRefused(R"({"d2/kernel": [null, "model"]})", 3,
                       "splits dimension 1 of variable 'd2/kernel' (size 10) "
                       "over model:3, which does not divide it");
  std::vector<VariableDef> table = {Variable("emb/embeddings", {0, 8})};
  table[0].set_sparse(true);
  absl::StatusOr<LayoutMap> map =
      LayoutMap::Parse(R"({"emb/.*": [null, "model"]})");
  ASSERT_TRUE(map.ok());
  absl::StatusOr<VariableSplits> splits = map->Resolve(table, 2);
  ASSERT_FALSE(splits.ok());
  EXPECT_NE(splits.status().message().find("'emb/embeddings', a growing"),
            absl::string_view::npos)
      << splits.status();
  // A table of a fixed vocabulary (sparse, but not growing) splits by rows.
  std::vector<VariableDef> fixed = {Variable("emb/embeddings", {16, 8})};
  fixed[0].set_sparse(true);
  absl::StatusOr<VariableSplits> rows = map->Resolve(fixed, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->at("emb/embeddings").split_dim, 1);
}

TEST(LayoutMap, LoadReadsTheFileAndNamesItInErrors) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string good = dir + "/good.json";
  std::ofstream(good) << R"({"d1/kernel": [null, "model"]})";
  absl::StatusOr<LayoutMap> map = LayoutMap::Load(good);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->size(), 1);
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << R"({"d1/kernel": ["x"]})";
  absl::StatusOr<LayoutMap> refused = LayoutMap::Load(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(bad), absl::string_view::npos);
  EXPECT_EQ(LayoutMap::Load(dir + "/missing.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
