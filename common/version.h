// The version of pstrain's binaries: what `--version` prints, what the
// start-up log line and the build information carry. Raise it with a
// release.
#ifndef PSTRAIN_COMMON_VERSION_H_
#define PSTRAIN_COMMON_VERSION_H_

namespace pstrain {

inline constexpr char kPstrainVersion[] = "0.1.0";

// The git commit the binary was built from ("1a7e882c0b35", with
// "-modified" when the checkout had uncommitted changes), known in builds
// made with `bazel build --config=stamp`; "" otherwise.
const char* BuildCommit();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_VERSION_H_
