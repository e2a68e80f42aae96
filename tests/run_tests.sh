#!/usr/bin/env bash
# The README's test command. Installs what is missing (third_party/
# install_deps.sh), builds and tests everything offline (`bazel test //...`),
# checks that the CPU-only build (`--config=cpu`) still builds, compiles the
# code with clang's lock checks (`--config=clang`), runs the fuzz targets
# under libFuzzer and the sanitizers (`--config=fuzz`, tests/fuzz/), and ends
# with one line "N passed, N failed, N skipped" counting Bazel's test targets
# of both test runs (a failed CPU-only, clang or fuzz build counts as one
# failure). A target that passed but skipped tests (no GPU here, no
# root: it prints why, gtest's "[  SKIPPED ]" or a shell test's
# "SKIPPED: ...") counts as skipped, not passed, and is listed with its
# reasons. Exits non-zero on any failure. Extra arguments go to the main
# `bazel test` (e.g. --config=opt). PSTRAIN_FUZZ=0 skips the libFuzzer runs.
set -uo pipefail
cd "$(dirname "$0")/.."

third_party/install_deps.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

log=$(mktemp)
fuzz_log=$(mktemp)
trap 'rm -f "$log" "$fuzz_log"' EXIT
bazel test "$@" //... 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}
bazel build --config=cpu //...
cpu_rc=$?

# Main output base: beside it go those of the clang and fuzz builds.
main_base=$(bazel info output_base 2>/dev/null) || main_base=""
other_root=$(dirname "${main_base:-${XDG_CACHE_HOME:-$HOME/.cache}/bazel/x}")
checkout_id=$(pwd | cksum | cut -d' ' -f1)

# Clang's thread-safety analysis turns the lock annotations (ABSL_GUARDED_BY,
# ...) into errors. It is a compiler check, so the code is compiled, not
# linked (--output_groups=compilation_outputs), in an output base of its own
# so that the main build's objects stay cached.
# Its targets are the packages under each source folder: `//...` would also
# walk into the main build's convenience links (bazel-<checkout>), which
# only the output base that made them knows to skip.
clang_targets=(//:all)
for dir in */; do
  dir=${dir%/}
  [ -L "$dir" ] && continue
  [ -n "$(find "$dir" -name BUILD -print -quit)" ] && clang_targets+=("//$dir/...")
done
bazel --output_base="$other_root/pstrain-clang-$checkout_id" \
  --max_idle_secs=60 build --config=clang \
  --output_groups=compilation_outputs -- "${clang_targets[@]}"
clang_rc=$?

# The fuzz targets again, built by clang with libFuzzer, ASan and UBSan, each
# fuzzing for 20 s (about 4 minutes in all on 2 cores), in an output base of
# their own so that the main build's objects stay cached. Its server exits
# after a minute idle.
fuzz_rc=0
if [ "${PSTRAIN_FUZZ:-1}" != 0 ]; then
  # Beside the main output base: <output_user_root>/pstrain-fuzz-<checkout>.
  fuzz_base="$other_root/pstrain-fuzz-$checkout_id"
  bazel --output_base="$fuzz_base" --max_idle_secs=60 \
    test --config=fuzz //tests/fuzz/... 2>&1 | tee "$fuzz_log"
  fuzz_rc=${PIPESTATUS[0]}
fi

# Bazel's summary has a line per test target: "//pkg:name  [(cached)] STATUS".
summary='^//[^ ]+ +(\(cached\) )?'
count() { grep -cE "${summary}$1" "$2"; }
bad='(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)'
passed=$(( $(count PASSED "$log") + $(count PASSED "$fuzz_log") ))
# Targets of the main run that passed but skipped tests, from their logs.
skipped=0
testlogs=$(bazel info "$@" bazel-testlogs 2>/dev/null || bazel info bazel-testlogs)
for target in $(grep -E "${summary}PASSED" "$log" | cut -d' ' -f1); do
  target_log="$testlogs/$(echo "${target#//}" | tr : /)/test.log"
  [ -f "$target_log" ] || continue
  if grep -qE '^(\[  SKIPPED \] |SKIPPED: )' "$target_log"; then
    echo "skipped: $target"
    grep -E '^SKIPPED: |skipped: ' "$target_log" | sort -u | head -5 |
      sed 's/^/    /'
    skipped=$((skipped + 1))
    passed=$((passed - 1))
  fi
done
failed=$(count "$bad" "$log")
# A build error with no test left to blame still fails the run.
if [ "$test_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
fuzz_failed=$(count "$bad" "$fuzz_log")
if [ "$fuzz_rc" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then
  echo "bazel test --config=fuzz //tests/fuzz/... failed to build"
  fuzz_failed=1
fi
failed=$((failed + fuzz_failed))
if [ "$cpu_rc" -ne 0 ]; then
  echo "bazel build --config=cpu //... failed"
  failed=$((failed + 1))
fi
if [ "$clang_rc" -ne 0 ]; then
  echo "bazel build --config=clang //... failed (thread-safety analysis?)"
  failed=$((failed + 1))
fi
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
