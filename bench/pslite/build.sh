#!/usr/bin/env bash
# Builds ps-lite (a checkout of github.com/dmlc/ps-lite; measured at commit
# 15b8adf) with Debian's ZeroMQ and protobuf, and our pslite_throughput.cc
# against it, outside the repository's Bazel build.
#
#   bench/pslite/build.sh PSLITE_SOURCE OUT_DIR
#
# PSLITE_SOURCE is copied into OUT_DIR/ps-lite first (its tree stays
# untouched); OUT_DIR/pslite_throughput is the result. Needs libzmq3-dev and
# protobuf-compiler (apt).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PSLITE_SOURCE OUT_DIR" >&2
  exit 2
fi
src=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
for f in /usr/include/zmq.h /usr/bin/protoc; do
  [ -e "$f" ] || { echo "$f missing: apt-get install libzmq3-dev protobuf-compiler" >&2; exit 1; }
done
mkdir -p "$out"
rm -rf "$out/ps-lite"
cp -r "$src" "$out/ps-lite"
# DEPS_PATH=/usr: the Makefile finds zmq.h and protobuf's headers there and
# does not download its own copies.
make -C "$out/ps-lite" -j2 ps DEPS_PATH=/usr PROTOC=/usr/bin/protoc \
  ADD_CFLAGS="-std=c++17 -O3 -DNDEBUG"
g++ -std=c++17 -O3 -DNDEBUG -pthread \
  -I"$out/ps-lite/include" "$here/pslite_throughput.cc" \
  "$out/ps-lite/build/libps.a" -lzmq -lprotobuf \
  -o "$out/pslite_throughput"
echo "built $out/pslite_throughput"
