#include "data/criteo_feed.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo_hash.h"
#include "data/criteo_line.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// Two rows parsed from lines: row r has label r, I_j = 10*r + j, C_k = the
// hex number 100*r + k (C26 of row 1 missing).
CriteoBatch TwoRows() {
  CriteoBatch batch;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> columns = {absl::StrCat(r)};
    for (int j = 1; j <= kCriteoDense; ++j) {
      columns.push_back(absl::StrCat(10 * r + j));
    }
    for (int k = 1; k <= kCriteoSparse; ++k) {
      columns.push_back(
          r == 1 && k == 26 ? "" : absl::StrCat(absl::Hex(100 * r + k)));
    }
    batch.labels.resize(r + 1);
    batch.dense.resize((r + 1) * kCriteoDense);
    batch.sparse.resize((r + 1) * kCriteoSparse);
    batch.lines.push_back(r);
    const absl::Status parsed = ParseCriteoLine(
        absl::StrJoin(columns, "\t"), &batch.labels[r],
        &batch.dense[r * kCriteoDense], &batch.sparse[r * kCriteoSparse]);
    EXPECT_TRUE(parsed.ok()) << parsed;
  }
  return batch;
}

uint64_t Bits(int64_t v) { return static_cast<uint64_t>(v); }

TEST(CriteoFeed, DenseAndSparseInputsHoldTheWholeRows) {
  const CriteoBatch batch = TwoRows();
  absl::StatusOr<Tensor> dense = CriteoInputTensor(batch, "dense");
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->dtype(), DT_FLOAT);
  EXPECT_EQ(dense->shape(), (std::vector<int64_t>{2, 13}));
  EXPECT_EQ(dense->data<float>()[13 + 4], CriteoDenseValue(15));  // row 1, I5
  absl::StatusOr<Tensor> sparse = CriteoInputTensor(batch, "sparse");
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->dtype(), DT_INT64);
  EXPECT_EQ(sparse->shape(), (std::vector<int64_t>{2, 26}));
  const int64_t* ids = sparse->data<int64_t>();
  EXPECT_EQ(Bits(ids[2]), CriteoSparseId(3, 3));         // row 0, C3
  EXPECT_EQ(Bits(ids[26 + 6]), CriteoSparseId(7, 107));  // row 1, C7
  EXPECT_EQ(Bits(ids[26 + 25]), CriteoMissingId(26));    // row 1, C26
}

TEST(CriteoFeed, PerFieldInputsHoldOneColumn) {
  const CriteoBatch batch = TwoRows();
  absl::StatusOr<Tensor> i13 = CriteoInputTensor(batch, "I13");
  ASSERT_TRUE(i13.ok()) << i13.status();
  EXPECT_EQ(i13->shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(i13->data<float>()[0], CriteoDenseValue(13));
  EXPECT_EQ(i13->data<float>()[1], CriteoDenseValue(23));
  absl::StatusOr<Tensor> c1 = CriteoInputTensor(batch, "C1");
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(c1->dtype(), DT_INT64);
  EXPECT_EQ(c1->shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Bits(c1->data<int64_t>()[0]), CriteoSparseId(1, 1));
  EXPECT_EQ(Bits(c1->data<int64_t>()[1]), CriteoSparseId(1, 101));
  absl::StatusOr<Tensor> labels = CriteoLabelTensor(batch);
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(labels->data<float>()[0], 0.0f);
  EXPECT_EQ(labels->data<float>()[1], 1.0f);
}

TEST(CriteoFeed, OtherNamesAreRefused) {
  const CriteoBatch batch = TwoRows();
  for (const std::string name : {"I0", "I14", "C0", "C27", "I01", "C+1", "C 1",
                                 "i1", "Dense", "label", "", "I", "C1x"}) {
    EXPECT_FALSE(IsCriteoInput(name)) << name;
    absl::StatusOr<Tensor> t = CriteoInputTensor(batch, name);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(t.status().message().find(absl::StrCat("'", name, "'")),
              absl::string_view::npos);
  }
  for (const std::string name : {"dense", "sparse", "I1", "I13", "C1", "C26"}) {
    EXPECT_TRUE(IsCriteoInput(name)) << name;
  }
}

TEST(CriteoFeed, AnEmptyBatchGivesEmptyTensors) {
  const CriteoBatch batch;
  absl::StatusOr<Tensor> sparse = CriteoInputTensor(batch, "sparse");
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->shape(), (std::vector<int64_t>{0, 26}));
}

}  // namespace
}  // namespace data
}  // namespace pstrain
