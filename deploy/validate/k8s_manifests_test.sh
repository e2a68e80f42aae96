#!/usr/bin/env bash
# Bazel test (//deploy:k8s_manifests_test): the Kubernetes manifests of
# deploy/k8s validated offline by deploy/validate/k8s.mjs (schemas of
# kubernetes-models, installed by third_party/install_deps.sh).
set -euo pipefail
root=${TEST_SRCDIR:?run under bazel test}/pstrain
validate=$(dirname "$(readlink -f "$root/deploy/validate/package.json")")
if [ ! -d "$validate/node_modules/kubernetes-models" ]; then
  echo "FAIL: no $validate/node_modules: run third_party/install_deps.sh"
  exit 1
fi
# node resolves the packages from the real location of k8s.mjs.
exec node "$root/deploy/validate/k8s.mjs" "$root"
