// Memory for large structures read at random (a growing embedding table's
// rows and index): allocations of at least kHugePageBytes are aligned to it
// and advised onto transparent huge pages (madvise MADV_HUGEPAGE), so that
// a lookup in a table far larger than the caches costs one TLB entry per
// 2 MiB instead of one per 4 KiB. Measured here with bench/embedding_step
// (a table of 640k rows of width 16, Adagrad; medians of 5 alternating
// runs): 55 ns instead of 71 per row pulled, 106 instead of 161 per row
// pushed and applied.
//
// Only advice: where the kernel has transparent huge pages off ("never") or
// none to give, the memory is ordinary pages. Smaller allocations are plain
// operator new, so a small table pays nothing.
//
//   absl::flat_hash_map<int64_t, int64_t, absl::Hash<int64_t>,
//                       std::equal_to<int64_t>,
//                       HugePageAllocator<std::pair<const int64_t, int64_t>>>
//       index;
#ifndef PSTRAIN_COMMON_HUGE_PAGES_H_
#define PSTRAIN_COMMON_HUGE_PAGES_H_

#include <cstddef>
#include <memory>
#include <type_traits>

namespace pstrain {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` of memory, huge-page advised when bytes >= kHugePageBytes. Never
// null: out of memory, it throws std::bad_alloc as operator new does.
void* AllocateMaybeHuge(size_t bytes);
// Frees what AllocateMaybeHuge(bytes) returned, with the same `bytes`.
void FreeMaybeHuge(void* p, size_t bytes);

// An array from AllocateMaybeHuge, left uninitialized: pages never written
// cost no memory (at 4 KiB below kHugePageBytes, at 2 MiB from it).
struct HugeFree {
  size_t bytes;
  void operator()(void* p) const { FreeMaybeHuge(p, bytes); }
};
template <typename T>
using HugeArray = std::unique_ptr<T[], HugeFree>;
template <typename T>
HugeArray<T> NewHugeArray(size_t n) {
  static_assert(std::is_trivial_v<T>, "the array is not initialized");
  return HugeArray<T>(static_cast<T*>(AllocateMaybeHuge(n * sizeof(T))),
                      HugeFree{n * sizeof(T)});
}

// A standard allocator over AllocateMaybeHuge.
template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    return static_cast<T*>(AllocateMaybeHuge(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) { FreeMaybeHuge(p, n * sizeof(T)); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_HUGE_PAGES_H_
