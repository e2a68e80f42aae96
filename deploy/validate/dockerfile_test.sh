#!/usr/bin/env bash
# Bazel test (//deploy:dockerfile_test): deploy/docker/Dockerfile is buildable
# by construction, checked without Docker by deploy/validate/dockerfile.mjs
# against the checkout, the sources of the binaries (genquery
# //deploy:image_sources) and the shared libraries the built binaries name
# (readelf -d), each with the Debian package that holds it (dpkg -S).
set -euo pipefail
root=${TEST_SRCDIR:?run under bazel test}/pstrain
# The checkout: the real directory behind this test's runfiles (Docker's
# build context, where node_modules is installed by install_deps.sh).
validate=$(dirname "$(readlink -f "$root/deploy/validate/package.json")")
src=$(cd "$validate/../.." && pwd)
if [ ! -d "$validate/node_modules/dockerfile-ast" ]; then
  echo "FAIL: no $validate/node_modules: run third_party/install_deps.sh"
  exit 1
fi

# "<binary> <soname> <path>" for every library a binary names, then each
# path's Debian package, from one dpkg -S for them all ("-" under
# /usr/local/cuda, which no Debian package holds).
libs=$TEST_TMPDIR/libs.txt
: >"$libs"
for b in chief ps worker; do
  bin=$root/$b/$b
  resolved=$(ldd "$bin")
  for so in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    path=$(awk -v s="$so" '$1 == s && $2 == "=>" { print $3 }' <<<"$resolved")
    [ -n "$path" ] || path=$(ldconfig -p | awk -v s="$so" '$1 == s && !found { print $NF; found = 1 }')
    [ -n "$path" ] || { echo "FAIL: $b needs $so, which is not installed here"; exit 1; }
    echo "$b $so $(readlink -f "$path")" >>"$libs"
  done
done
owners=$TEST_TMPDIR/owners.txt
# dpkg may know a file by its path before the /usr merge (/lib/...): ask for
# both, and answer with the /usr path.
awk '$3 !~ /^\/usr\/local\/cuda/ { print $3; sub(/^\/usr/, "", $3); print $3 }' "$libs" |
  sort -u | xargs dpkg -S 2>/dev/null |
  sed 's/^\([^:]*\):[^ ]* \(.*\)$/\2 \1/; s/^\/\(lib\|lib64\|bin\|sbin\)\//\/usr\/\1\//' >"$owners" || true
needed=$TEST_TMPDIR/needed.txt
while read -r b so path; do
  pkg=$(awk -v p="$path" '$1 == p { print $2; exit }' "$owners")
  if [[ $path == /usr/local/cuda* ]]; then
    pkg=-
  elif [ -z "$pkg" ]; then
    echo "FAIL: $b needs $so ($path), which no Debian package holds"
    exit 1
  fi
  echo "$b $so $pkg"
done <"$libs" >"$needed"
exec node "$root/deploy/validate/dockerfile.mjs" "$src" \
  "$root/deploy/image_sources" "$needed"
