#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace pstrain {

void* AllocateMaybeHuge(size_t bytes) {
  if (bytes < kHugePageBytes) return ::operator new(bytes);
  // aligned_alloc wants a multiple of the alignment; the pages past `bytes`
  // are never touched, so they cost address space only.
  const size_t rounded =
      (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Advice: a kernel without transparent huge pages refuses it, and the
  // memory stays on ordinary pages.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void FreeMaybeHuge(void* p, size_t bytes) {
  if (bytes < kHugePageBytes) {
    ::operator delete(p);
  } else {
    std::free(p);
  }
}

}  // namespace pstrain
