#include "common/version.h"

namespace pstrain {

const char* BuildCommit() {
  // A string literal, written by the genrule common:build_commit.
  return
#include "common/build_commit.inc"
      ;
}

}  // namespace pstrain
