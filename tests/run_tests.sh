#!/usr/bin/env bash
# The README's test command. Installs what is missing (third_party/
# install_deps.sh), builds and tests everything offline (`bazel test //...`),
# checks that the CPU-only build (`--config=cpu`) still builds, and ends with
# one line "N passed, N failed" counting Bazel's test targets (a failed
# CPU-only build counts as one failure). Exits non-zero on any failure.
# Extra arguments go to `bazel test` (e.g. --config=opt).
set -uo pipefail
cd "$(dirname "$0")/.."

third_party/install_deps.sh || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test "$@" //... 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}
bazel build --config=cpu //...
cpu_rc=$?

# Bazel's summary has a line per test target: "//pkg:name  [(cached)] STATUS".
summary='^//[^ ]+ +(\(cached\) )?'
passed=$(grep -cE "${summary}PASSED" "$log")
failed=$(grep -cE "${summary}(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)" "$log")
# A build error with no test left to blame still fails the run.
if [ "$test_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ "$cpu_rc" -ne 0 ]; then
  echo "bazel build --config=cpu //... failed"
  failed=$((failed + 1))
fi
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
