#include "common/huge_pages.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(HugePages, LargeAllocationsAreAlignedToAHugePage) {
  for (size_t bytes :
       {kHugePageBytes, kHugePageBytes + 1, 5 * kHugePageBytes}) {
    void* p = AllocateMaybeHuge(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u) << bytes;
    std::memset(p, 0x5a, bytes);  // all of it is writable
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
    FreeMaybeHuge(p, bytes);
  }
}

// The mapping holding a large vector's storage is advised for huge pages
// (its VmFlags in /proc/self/smaps carry "hg"); whether the kernel then
// has huge pages to give is its business, not ours.
TEST(HugePages, AVectorsLargeStorageIsAdvisedForHugePages) {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(setting, line);
  if (line.empty() || line.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "skipped: transparent huge pages are off here ("
                 << (line.empty() ? "no setting" : line) << ")";
  }
  std::vector<float, HugePageAllocator<float>> v(kHugePageBytes, 1.0f);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(v.data());
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  std::string flags;
  while (std::getline(smaps, line)) {
    unsigned long low = 0, high = 0;  // a mapping's first line: "low-high ..."
    if (std::sscanf(line.c_str(), "%lx-%lx", &low, &high) == 2) {
      inside = low <= begin && begin < high;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds it";
  EXPECT_NE(flags.find(" hg "), std::string::npos) << flags;
}

}  // namespace
}  // namespace pstrain
