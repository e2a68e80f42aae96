#!/usr/bin/env bash
# `--help` and `--version` of the three binaries: --help prints the binary's
# usage line, then every flag its main.cc defines (read from the source, so a
# flag added later is covered too), each with its help text, and no flag of
# Abseil's own (those are for --helpfull); no help text points to a tutorial
# or a seed instead of saying what the flag does; --version prints the
# binary's name and pstrain's version (and the commit of a stamped build) and
# exits 0; a flag value that does not parse exits 2 with one line.
#
#   bazel test //tests:help_test
set -uo pipefail

root=${TEST_SRCDIR:?run under bazel test}/${TEST_WORKSPACE:-pstrain}
version=$(sed -n 's/.*kPstrainVersion\[\] = "\(.*\)";/\1/p' \
  "$root/common/version.h")
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

check_binary() {
  local name=$1 usage=$2 int_flag=$3 help rc flags flag
  help=$("$root/$name/$name" --help 2>&1)
  rc=$?
  # Abseil ends a help with status 1.
  [ "$rc" -le 1 ] || fail "$name --help: status $rc"
  grep -qF "$name: $usage" <<<"$help" ||
    fail "$name --help: no usage line \"$name: $usage\": $help"
  grep -qF "Flags from $name/main.cc:" <<<"$help" ||
    fail "$name --help: its main.cc's flags are not listed: $help"
  # The flags main.cc defines: ABSL_FLAG(type, name, ...), the type possibly
  # holding a comma (absl::Duration has none; int64_t has none).
  flags=$(grep -o 'ABSL_FLAG([^,]*, *[a-z0-9_]*' "$root/$name/main.cc" |
    sed 's/.*, *//')
  [ "$(wc -w <<<"$flags")" -ge 5 ] || fail "$name: found only: $flags"
  # Every flag, then "(" and a letter: its help text starts on that line.
  for flag in $flags; do
    grep -qE -- "--$flag \([A-Za-z-]" <<<"$help" ||
      fail "$name --help: --$flag is missing or has no help text"
  done
  # Abseil's flags belong to --helpfull.
  if grep -qE -- "--(flagfile|fromenv|undefok) " <<<"$help"; then
    fail "$name --help lists Abseil's flags"
  fi
  if grep -qiE "tutorial|seed [0-9]{3}" <<<"$help"; then
    fail "$name --help: a help text refers to a tutorial or seed: $(
      grep -iE 'tutorial|seed [0-9]{3}' <<<"$help")"
  fi

  local out version_out
  out=$("$root/$name/$name" --version 2>&1)
  version_out=$out
  rc=$?
  [ "$rc" = 0 ] || fail "$name --version: status $rc"
  # A build made with --config=stamp names its commit too.
  grep -qxE "$name \(pstrain ${version//./\\.}(, commit [0-9a-f]+(-modified)?)?\)" \
    <<<"$out" ||
    fail "$name --version printed \"$out\", not \"$name (pstrain $version)\""
  # A value that does not parse: Abseil's line, and status 2.
  out=$("$root/$name/$name" "--$int_flag=x" 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "$name --$int_flag=x: status $rc, not 2"
  [ "$out" = "ERROR: Illegal value 'x' specified for flag '$int_flag'" ] ||
    fail "$name --$int_flag=x printed \"$out\""
  echo "$name: --help lists $(wc -w <<<"$flags") flags; --version: $version_out"
}

[ -n "$version" ] || fail "no kPstrainVersion in common/version.h"
check_binary chief "Runs a pstrain training run" port
check_binary ps "Runs one parameter-server task" port
check_binary worker "Runs one worker task" threads
exit $((failures > 0))
