#!/usr/bin/env bash
# Packs pstrain binaries for a GPU machine that has CUDA, cuDNN and NCCL but
# no Bazel, gRPC or oneDNN: each binary goes to OUT/bin/, and every shared
# library `ldd` resolves for them, except the C/C++ runtime and the CUDA
# libraries (which the GPU machine brings), to OUT/lib/. Then, there:
#
#   LD_LIBRARY_PATH=OUT/lib:<cuda, cudnn and nccl lib folders> OUT/bin/worker ...
#
#   bench/gpu_bundle.sh /tmp/bundle bazel-out/k8-opt/bin/worker/worker ...
#
# A binary's relative path under bazel-out/<config>/bin/ is kept (worker/
# worker stays worker/worker), so OUT/bin works as run_cluster.sh's --bin_dir.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUT BINARY..." >&2
  exit 2
fi
out=$1
shift
mkdir -p "$out/bin" "$out/lib"
# What the GPU machine provides: glibc, the C++ runtime, the CUDA libraries.
provided='^(ld-linux|linux-vdso|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl)[.-]'
for binary in "$@"; do
  relative=${binary#*/bin/}
  [ "$relative" = "$binary" ] && relative=$(basename "$binary")
  mkdir -p "$out/bin/$(dirname "$relative")"
  cp -f "$binary" "$out/bin/$relative"
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    while read -r name path; do
      if [[ ! $name =~ $provided ]]; then cp -fL "$path" "$out/lib/$name"; fi
    done
done
echo "$out: $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1)" >&2
