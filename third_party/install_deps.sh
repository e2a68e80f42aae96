#!/usr/bin/env bash
# Installs every Debian package pstrain needs to build, test and run, and,
# in a checkout, the npm packages of the deployment tests
# (deploy/validate/package-lock.json, into deploy/validate/node_modules).
# Idempotent: prints nothing and changes nothing when all are installed.
# Used by the README's commands, .ci/run and deploy/docker/Dockerfile (whose
# build stage runs it before the checkout is copied in, so with no npm part).
set -euo pipefail
validate=$(cd "$(dirname "$0")/.." && pwd)/deploy/validate

packages=(
  # Build: Bazel 4.2.3 and its helper libraries, the C++ compiler.
  bazel-bootstrap bazel-platforms bazel-skylib g++
  # Wire: gRPC and protobuf, with their code generators.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # Abseil, JSON, oneDNN (CPU compute), RE2 (patterns in layout maps and
  # placement rules).
  libabsl-dev nlohmann-json3-dev libdnnl-dev zlib1g-dev libre2-dev
  # Tests and benchmarks; jq, iproute2 and openssl for the deployment tests
  # (pstrain-launch, the multi-host test's network namespaces, TLS secrets).
  libgtest-dev libgmock-dev libbenchmark-dev jq iproute2 openssl
  # tests/tensorboard_reader.py: TensorBoard's event files parsed with
  # protobuf's Python runtime, not our generated code.
  python3-protobuf
  # The fuzz targets (tests/fuzz): clang, its libFuzzer and sanitizer
  # runtimes, and the linker they use.
  clang libclang-rt-dev lld
  # The main job's data: the real Fashion-MNIST in IDX format.
  dataset-fashion-mnist
  # bench/criteo_gen.py (Criteo-format data), run by //data:criteo_generator_test.
  python3-numpy
  # tests/prometheus_test: Prometheus and promtool scrape and lint /metrics.
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm for the deployment tests, unless some node is there
# already (a NodeSource nodejs carries its own npm and conflicts with
# Debian's npm package).
if [ -f "$validate/package-lock.json" ] &&
   ! { command -v node && command -v npm; } >/dev/null; then
  missing+=(nodejs npm)
fi

# deploy/validate's npm packages, exactly as locked, when they are missing or
# the lock file changed since they were installed.
npm_ci() {
  [ -f "$validate/package-lock.json" ] || return 0
  local stamp=$validate/node_modules/.pstrain-lock
  cmp -s "$validate/package-lock.json" "$stamp" 2>/dev/null && return 0
  echo "install_deps.sh: npm ci in deploy/validate" >&2
  (cd "$validate" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$validate/package-lock.json" "$stamp"
}

if [ ${#missing[@]} -eq 0 ]; then
  npm_ci
  exit 0
fi

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
npm_ci
