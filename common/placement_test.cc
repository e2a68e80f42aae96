#include "common/placement.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

VariableDef Var(const std::string& name, std::vector<int64_t> dims,
                bool sparse = false, DataType dtype = DT_FLOAT) {
  VariableDef v;
  v.set_name(name);
  v.set_dtype(dtype);
  for (int64_t d : dims) v.mutable_shape()->add_dims(d);
  v.set_sparse(sparse);
  return v;
}

PlacementOptions Options(int num_ps, std::vector<PlacementRule> rules = {}) {
  PlacementOptions options;
  options.num_ps = num_ps;
  options.rules = std::move(rules);
  return options;
}

Placement MustPlace(const std::vector<VariableDef>& variables,
                    const PlacementOptions& options) {
  absl::StatusOr<Placement> placement = ComputePlacement(variables, options);
  EXPECT_TRUE(placement.ok()) << placement.status();
  return placement.ok() ? *placement : Placement();
}

const VariablePlacement& Find(const Placement& placement,
                              const std::string& name) {
  for (const VariablePlacement& v : placement.variables()) {
    if (v.name() == name) return v;
  }
  ADD_FAILURE() << "no variable " << name;
  static const VariablePlacement* const kEmpty = new VariablePlacement;
  return *kEmpty;
}

std::vector<int> Tasks(const VariablePlacement& v) {
  std::vector<int> tasks;
  for (const auto& s : v.slices()) tasks.push_back(s.ps_task());
  return tasks;
}

std::vector<int64_t> SliceRows(const VariablePlacement& v) {
  std::vector<int64_t> rows;
  for (const auto& s : v.slices()) rows.push_back(s.row_end() - s.row_begin());
  return rows;
}

// A mix of big, small, scalar and sparse variables, names in no order.
std::vector<VariableDef> MixedModel() {
  std::vector<VariableDef> vars = {
      Var("embedding/embeddings", {0, 16}, /*sparse=*/true),
      Var("vocab/embeddings", {5000, 32}, /*sparse=*/true),
      Var("step", {}, false, DT_INT64),
  };
  for (int i = 0; i < 12; ++i) {
    vars.push_back(
        Var(absl::StrCat("dense_", i, "/kernel"), {100 * i + 1, 64}));
    vars.push_back(Var(absl::StrCat("dense_", i, "/bias"), {64}));
  }
  vars.push_back(Var("big/kernel", {4096, 512}));
  return vars;
}

TEST(Placement, SameResultForAnyInputOrder) {
  std::vector<VariableDef> vars = MixedModel();
  PlacementOptions options = Options(3);
  options.split_threshold_bytes = 64 << 10;
  const std::string expected = MustPlace(vars, options).SerializeAsString();
  EXPECT_EQ(MustPlace(vars, options).SerializeAsString(), expected);
  std::mt19937 rng(7);
  for (int round = 0; round < 10; ++round) {
    std::shuffle(vars.begin(), vars.end(), rng);
    EXPECT_EQ(MustPlace(vars, options).SerializeAsString(), expected)
        << "round " << round;
  }
}

TEST(Placement, ListsEveryVariableOnceSortedByName) {
  const Placement placement = MustPlace(MixedModel(), Options(4));
  EXPECT_EQ(placement.num_ps(), 4);
  ASSERT_EQ(placement.variables_size(), static_cast<int>(MixedModel().size()));
  for (int i = 1; i < placement.variables_size(); ++i) {
    EXPECT_LT(placement.variables(i - 1).name(), placement.variables(i).name());
  }
}

TEST(Placement, BalancesBytesWithinLargestPiece) {
  // 40 variables from a few bytes to ~1 MB; those above 256 KiB get split.
  std::vector<VariableDef> vars;
  uint64_t state = 12345;
  auto next = [&state](int64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % n);
  };
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t rows = 1 + next(2000), cols = 1 + next(128);
    vars.push_back(Var(absl::StrCat("layer_", i, "/kernel"), {rows, cols}));
    total += rows * cols * 4;
  }
  for (int num_ps : {3, 4, 7}) {
    SCOPED_TRACE(absl::StrCat("num_ps ", num_ps));
    PlacementOptions options = Options(num_ps);
    options.split_threshold_bytes = 256 << 10;
    const Placement placement = MustPlace(vars, options);
    ASSERT_EQ(placement.variables_size(), 40);
    std::vector<int64_t> loads(num_ps, 0);
    int64_t largest_piece = 0;
    int split = 0;
    for (const VariablePlacement& v : placement.variables()) {
      const VariableDef& def = *std::find_if(
          vars.begin(), vars.end(),
          [&v](const VariableDef& d) { return d.name() == v.name(); });
      const int64_t row_bytes = def.shape().dims(1) * 4;
      std::set<int> distinct;
      int64_t next_row = 0;
      for (const auto& s : v.slices()) {
        EXPECT_EQ(s.row_begin(), next_row) << v.name();
        next_row = s.row_end();
        const int64_t bytes = (s.row_end() - s.row_begin()) * row_bytes;
        loads[s.ps_task()] += bytes;
        largest_piece = std::max(largest_piece, bytes);
        distinct.insert(s.ps_task());
      }
      EXPECT_EQ(next_row, def.shape().dims(0)) << v.name();
      EXPECT_EQ(distinct.size(), static_cast<size_t>(v.slices_size()));
      if (v.partitioning() == VariablePlacement::ROW_RANGES) ++split;
    }
    EXPECT_GT(split, 0);
    int64_t sum = 0;
    for (int64_t load : loads) sum += load;
    EXPECT_EQ(sum, total);
    const auto [min, max] = std::minmax_element(loads.begin(), loads.end());
    EXPECT_LE(*max - *min, largest_piece);
  }
}

// 1001 rows of 64 floats: 256,256 bytes, above this threshold.
PlacementOptions SplitAbove64KiB(int num_ps) {
  PlacementOptions options = Options(num_ps);
  options.split_threshold_bytes = 64 << 10;
  return options;
}

TEST(Placement, SplitsLargeVariableIntoEvenContiguousRanges) {
  const Placement placement =
      MustPlace({Var("w", {1001, 64})}, SplitAbove64KiB(4));
  const VariablePlacement& v = placement.variables(0);
  EXPECT_EQ(v.partitioning(), VariablePlacement::ROW_RANGES);
  EXPECT_EQ(SliceRows(v), (std::vector<int64_t>{251, 250, 250, 250}));
  EXPECT_EQ(v.slices(0).row_begin(), 0);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(v.slices(i).row_begin(), v.slices(i - 1).row_end());
  }
  EXPECT_EQ(v.slices(3).row_end(), 1001);
  std::vector<int> tasks = Tasks(v);
  std::sort(tasks.begin(), tasks.end());
  EXPECT_EQ(tasks, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Placement, SplitsOnlyAboveThreshold) {
  PlacementOptions options = Options(4);
  options.split_threshold_bytes = 1024;
  const Placement placement = MustPlace(
      {Var("at", {16, 16}), Var("above", {16, 16}, false, DT_DOUBLE)}, options);
  EXPECT_EQ(Find(placement, "at").partitioning(), VariablePlacement::WHOLE);
  EXPECT_EQ(SliceRows(Find(placement, "at")), (std::vector<int64_t>{16}));
  EXPECT_EQ(Find(placement, "above").partitioning(),
            VariablePlacement::ROW_RANGES);
  EXPECT_EQ(Find(placement, "above").slices_size(), 4);
}

TEST(Placement, ScalarsOneRowAndEmptyVariablesStayWhole) {
  PlacementOptions options = Options(4);
  options.split_threshold_bytes = 0;
  const Placement placement = MustPlace(
      {Var("scalar", {}), Var("row", {1, 100000}), Var("empty", {0, 8})},
      options);
  for (const VariablePlacement& v : placement.variables()) {
    EXPECT_EQ(v.partitioning(), VariablePlacement::WHOLE) << v.name();
    ASSERT_EQ(v.slices_size(), 1);
    EXPECT_EQ(v.slices(0).row_begin(), 0);
  }
  EXPECT_EQ(Find(placement, "scalar").slices(0).row_end(), 1);
  EXPECT_EQ(Find(placement, "row").slices(0).row_end(), 1);
  EXPECT_EQ(Find(placement, "empty").slices(0).row_end(), 0);
}

TEST(Placement, SplitVariablesGoFirstOntoLeastLoadedTasks) {
  // Tiny variables with rules, so bytes alone decide the order.
  const Placement placement =
      MustPlace({Var("a", {4, 256}), Var("b", {3, 256}), Var("c", {1, 256}),
                 Var("d", {1, 128}), Var("e", {16, 256})},
                Options(3, {{"^[ab]$", 2}, {"^e$", 1}}));
  // a (4 KiB): 2 x 2 KiB on ps 0, 1.
  EXPECT_EQ(Tasks(Find(placement, "a")), (std::vector<int>{0, 1}));
  // b: its 2-row slice onto empty ps 2, its 1-row slice onto ps 0 (ties with
  // ps 1, lowest index). Loads 3072, 2048, 2048.
  EXPECT_EQ(Tasks(Find(placement, "b")), (std::vector<int>{2, 0}));
  // Whole ones, largest first: e (16 KiB) -> ps 1; c (1 KiB) -> ps 2;
  // d (512 B) -> ps 0 (3072 each on ps 0 and 2).
  EXPECT_EQ(Tasks(Find(placement, "e")), (std::vector<int>{1}));
  EXPECT_EQ(Tasks(Find(placement, "c")), (std::vector<int>{2}));
  EXPECT_EQ(Tasks(Find(placement, "d")), (std::vector<int>{0}));
}

TEST(Placement, EqualWholeVariablesAreOrderedByName) {
  const Placement placement =
      MustPlace({Var("z", {8}), Var("y", {8}), Var("x", {8})}, Options(2));
  EXPECT_EQ(Tasks(Find(placement, "x")), (std::vector<int>{0}));
  EXPECT_EQ(Tasks(Find(placement, "y")), (std::vector<int>{1}));
  EXPECT_EQ(Tasks(Find(placement, "z")), (std::vector<int>{0}));
}

TEST(Placement, ExactRuleKeyBeatsEarlierRegex) {
  const Placement placement =
      MustPlace({Var("d1/kernel", {8, 8}), Var("d2/kernel", {8, 8})},
                Options(4, {{".*kernel", 3}, {"d1/kernel", 2}}));
  EXPECT_EQ(Find(placement, "d1/kernel").slices_size(), 2);
  EXPECT_EQ(Find(placement, "d2/kernel").slices_size(), 3);
}

TEST(Placement, FirstMatchingRegexWinsAndMatchesAnywhere) {
  const Placement placement =
      MustPlace({Var("d1/kernel", {8, 8}), Var("d1/bias", {8})},
                Options(4, {{"kernel", 3}, {"d1/.*", 2}, {"d1", 4}}));
  EXPECT_EQ(Find(placement, "d1/kernel").slices_size(), 3);
  EXPECT_EQ(Find(placement, "d1/bias").slices_size(), 2);
}

TEST(Placement, RuleMatchesAVeryLongName) {
  // std::regex overflowed its stack here (common/pattern.h).
  const std::string name = std::string(100000, 'd') + "/kernel";
  const Placement placement =
      MustPlace({Var(name, {8, 8})}, Options(4, {{".*kernel", 3}}));
  EXPECT_EQ(Find(placement, name).slices_size(), 3);
}

TEST(Placement, RuleWithOneShardKeepsLargeVariableWhole) {
  const Placement placement =
      MustPlace({Var("big", {4096, 4096})}, Options(4, {{"big", 1}}));
  EXPECT_EQ(placement.variables(0).partitioning(), VariablePlacement::WHOLE);
}

TEST(Placement, RuleWithTwoShardsSplitsSmallVariable) {
  const Placement placement =
      MustPlace({Var("small", {5, 2})}, Options(4, {{"small", 2}}));
  EXPECT_EQ(placement.variables(0).partitioning(),
            VariablePlacement::ROW_RANGES);
  EXPECT_EQ(SliceRows(placement.variables(0)), (std::vector<int64_t>{3, 2}));
}

TEST(Placement, RuleWithZeroShardsSplitsBySize) {
  const Placement placement =
      MustPlace({Var("big", {4096, 4096}), Var("small", {4, 4})},
                Options(4, {{".*", 0}, {"bi", 1}}));
  EXPECT_EQ(Find(placement, "big").slices_size(), 4);
  EXPECT_EQ(Find(placement, "small").slices_size(), 1);
}

TEST(Placement, RuleShardsAreClampedToNumPsAndRows) {
  const Placement placement = MustPlace(
      {Var("wide", {100, 4}), Var("short", {3, 4})}, Options(4, {{".*", 8}}));
  EXPECT_EQ(Find(placement, "wide").slices_size(), 4);
  EXPECT_EQ(SliceRows(Find(placement, "short")),
            (std::vector<int64_t>{1, 1, 1}));
}

TEST(Placement, GrowingEmbeddingIsHashedOverAllPsAndNotCounted) {
  const Placement placement =
      MustPlace({Var("emb", {0, 16}, /*sparse=*/true),
                 Var("small", {0, 8}, true), Var("w", {4})},
                Options(4, {{"small", 2}}));
  const VariablePlacement& emb = Find(placement, "emb");
  EXPECT_EQ(emb.partitioning(), VariablePlacement::ROW_HASH);
  EXPECT_EQ(Tasks(emb), (std::vector<int>{0, 1, 2, 3}));
  for (const auto& s : emb.slices()) {
    EXPECT_EQ(s.row_begin(), 0);
    EXPECT_EQ(s.row_end(), 0);
  }
  EXPECT_EQ(Tasks(Find(placement, "small")), (std::vector<int>{0, 1}));
  // Hash tables add no load: the dense variable still lands on ps 0.
  EXPECT_EQ(Tasks(Find(placement, "w")), (std::vector<int>{0}));
}

TEST(Placement, SparseTableWithVocabularyIsSplitLikeDense) {
  const Placement placement = MustPlace(
      {Var("vocab", {100000, 64}, /*sparse=*/true), Var("tiny", {10, 4}, true)},
      Options(2));
  EXPECT_EQ(Find(placement, "vocab").partitioning(),
            VariablePlacement::ROW_RANGES);
  EXPECT_EQ(SliceRows(Find(placement, "vocab")),
            (std::vector<int64_t>{50000, 50000}));
  EXPECT_EQ(Find(placement, "tiny").partitioning(), VariablePlacement::WHOLE);
}

TEST(SliceForRow, FindsRangeHoldingRow) {
  const Placement placement =
      MustPlace({Var("w", {1001, 64})}, SplitAbove64KiB(4));
  const VariablePlacement& v = placement.variables(0);
  const std::pair<int64_t, int> cases[] = {
      {0, 0}, {250, 0}, {251, 1}, {500, 1}, {501, 2}, {751, 3}, {1000, 3}};
  for (const auto& [row, slice] : cases) {
    absl::StatusOr<int> got = SliceForRow(v, row);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, slice) << "row " << row;
  }
  absl::StatusOr<int> past = SliceForRow(v, 1001);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(past.status().message()),
              HasSubstr("'w': row 1001 is outside its rows [0, 1001)"));
  EXPECT_EQ(SliceForRow(v, -1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(SliceForRow, WholeVariableHasOneSlice) {
  const Placement placement =
      MustPlace({Var("b", {10}), Var("s", {})}, Options(2));
  EXPECT_EQ(*SliceForRow(Find(placement, "b"), 0), 0);
  EXPECT_EQ(*SliceForRow(Find(placement, "b"), 9), 0);
  EXPECT_EQ(SliceForRow(Find(placement, "b"), 10).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*SliceForRow(Find(placement, "s"), 0), 0);
}

TEST(SliceForRow, HashedRowGoesToRowModSlices) {
  const Placement placement =
      MustPlace({Var("emb", {0, 8}, /*sparse=*/true)}, Options(4));
  const VariablePlacement& v = placement.variables(0);
  EXPECT_EQ(*SliceForRow(v, 0), 0);
  EXPECT_EQ(*SliceForRow(v, 10), 2);
  EXPECT_EQ(*SliceForRow(v, int64_t{1} << 40), 0);
  absl::StatusOr<int> negative = SliceForRow(v, -3);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(negative.status().message()),
              HasSubstr("'emb': row -3"));
}

TEST(SliceForRow, RejectsPlacementWithoutSlicesOrPartitioning) {
  VariablePlacement v;
  v.set_name("v");
  v.set_partitioning(VariablePlacement::ROW_HASH);
  EXPECT_EQ(SliceForRow(v, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  v.set_partitioning(VariablePlacement::PARTITIONING_UNSPECIFIED);
  v.add_slices();
  EXPECT_EQ(SliceForRow(v, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The error ComputePlacement returns; it must be INVALID_ARGUMENT.
std::string PlacementError(const std::vector<VariableDef>& variables,
                           const PlacementOptions& options) {
  absl::StatusOr<Placement> placement = ComputePlacement(variables, options);
  EXPECT_EQ(placement.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(placement.status().message());
}

TEST(Placement, RejectsBadOptions) {
  EXPECT_THAT(PlacementError({}, Options(0)), HasSubstr("num_ps 0"));
  PlacementOptions options = Options(1);
  options.split_threshold_bytes = -1;
  EXPECT_THAT(PlacementError({}, options),
              HasSubstr("split_threshold_bytes -1 is negative"));
}

TEST(Placement, RejectsBadRules) {
  EXPECT_THAT(PlacementError({Var("w", {2})}, Options(2, {{"([", 1}})),
              HasSubstr("rule '([': invalid regular expression"));
  EXPECT_THAT(PlacementError({Var("w", {2})}, Options(2, {{"w", -1}})),
              HasSubstr("rule 'w': num_shards -1 is negative"));
}

TEST(Placement, RejectsBadNames) {
  EXPECT_THAT(PlacementError({Var("a", {2}), Var("", {2})}, Options(2)),
              HasSubstr("variable 1 has an empty name"));
  EXPECT_THAT(
      PlacementError({Var("dense/kernel", {2}), Var("dense/kernel", {3})},
                     Options(2)),
      HasSubstr("variable 'dense/kernel': duplicate name"));
}

TEST(Placement, RejectsBadDtypeAndShape) {
  EXPECT_THAT(PlacementError({Var("w", {2}, false, DT_INVALID)}, Options(2)),
              HasSubstr("variable 'w': invalid dtype"));
  EXPECT_EQ(PlacementError({Var("dense/kernel", {10, -1})}, Options(2)),
            "placement: variable 'dense/kernel': shape [10, -1]: dimension 1 "
            "is negative");
  EXPECT_THAT(
      PlacementError({Var("huge", {int64_t{1} << 31, int64_t{1} << 31})},
                     Options(2)),
      HasSubstr("variable 'huge': shape [2147483648, 2147483648]: more than "
                "2^62 bytes"));
  // Each 2^62 bytes, together too many.
  EXPECT_THAT(PlacementError({Var("a", {int64_t{1} << 30, int64_t{1} << 30}),
                              Var("b", {int64_t{1} << 30, int64_t{1} << 30})},
                             Options(2)),
              HasSubstr("variable 'b': all variables together exceed 2^62"));
  EXPECT_THAT(PlacementError({Var("step", {}, /*sparse=*/true)}, Options(2)),
              HasSubstr("variable 'step': a sparse variable needs rank >= 1"));
}

}  // namespace
}  // namespace pstrain
