#!/usr/bin/env bash
# Installs every Debian package pstrain needs to build, test and run.
# Idempotent: prints nothing and changes nothing when all are installed.
# Used by the README's commands, .ci/run and deploy/docker/Dockerfile.
set -euo pipefail

packages=(
  # Build: Bazel 4.2.3 and its helper libraries, the C++ compiler.
  bazel-bootstrap bazel-platforms bazel-skylib g++
  # Wire: gRPC and protobuf, with their code generators.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # Abseil, JSON, oneDNN (CPU compute).
  libabsl-dev nlohmann-json3-dev libdnnl-dev zlib1g-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev
  # The main job's data: the real Fashion-MNIST in IDX format.
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install_deps.sh: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo="sudo"
fi
echo "install_deps.sh: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
  "${missing[@]}" >/dev/null
