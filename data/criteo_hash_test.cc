#include "data/criteo_hash.h"

#include <cstdint>
#include <set>

#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// Computed independently of this code, in Python, from the formulas in
// criteo_hash.h:
//   M=(1<<64)-1
//   def s(x):
//     x=(x+0x9e3779b97f4a7c15)&M; x=((x^(x>>30))*0xbf58476d1ce4e5b9)&M
//     x=((x^(x>>27))*0x94d049bb133111eb)&M; return x^(x>>31)
//   value id: s(s(f)^v); missing id: s(s(f+32))
struct ValueCase {
  int field;
  uint64_t value;
  uint64_t id;
};
constexpr ValueCase kValueIds[] = {
    {1, 0x0ULL, 0x5e41ab087439611eULL},
    {1, 0x68fd1e64ULL, 0x7132bda5bf5ef2bdULL},
    {2, 0x80e26c9bULL, 0x4bd20825cceac3ffULL},
    {7, 0xffffffffULL, 0x56504c1930966871ULL},
    {26, 0x1ULL, 0xea900974d525446bULL},
    {13, 0xffffffffffffffffULL, 0x9b49a723d2680d9dULL},
    {26, 0x3b183c5cULL, 0x3f5268f66966e3d9ULL},
};
struct MissingCase {
  int field;
  uint64_t id;
};
constexpr MissingCase kMissingIds[] = {
    {1, 0x5948f74ea53fe47cULL},
    {2, 0xf36a5a49db5899faULL},
    {26, 0xe65493784dbee446ULL},
};

TEST(CriteoHash, ValueIdsMatchAnIndependentComputation) {
  for (const ValueCase& c : kValueIds) {
    EXPECT_EQ(CriteoSparseId(c.field, c.value), c.id)
        << "C" << c.field << " value " << std::hex << c.value;
  }
}

TEST(CriteoHash, MissingIdsMatchAnIndependentComputation) {
  for (const MissingCase& c : kMissingIds) {
    EXPECT_EQ(CriteoMissingId(c.field), c.id) << "C" << c.field;
  }
}

TEST(CriteoHash, FieldsSeparateEqualValues) {
  std::set<uint64_t> ids;
  for (int field = 1; field <= 26; ++field) {
    ids.insert(CriteoSparseId(field, 0x68fd1e64));
    ids.insert(CriteoMissingId(field));
  }
  EXPECT_EQ(ids.size(), 52u);
}

TEST(CriteoHash, MissingIdIsNotASmallValuesId) {
  for (int field = 1; field <= 26; ++field) {
    for (uint64_t v = 0; v < 4096; ++v) {
      ASSERT_NE(CriteoSparseId(field, v), CriteoMissingId(field));
    }
    ASSERT_NE(CriteoSparseId(field, ~uint64_t{0}), CriteoMissingId(field));
  }
}

}  // namespace
}  // namespace data
}  // namespace pstrain
