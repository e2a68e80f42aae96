# Sourced by bench/'s side-by-side scripts (bash, run from the repository
# root): what each of them needs to run pstrain and PyTorch the same way.

# pytorch_python ARGS...: Debian's python (the one with torch 1.13) with
# OpenBLAS's OpenMP build and the glibc malloc tunables that
# bench/pytorch_cnn.py documents (without them PyTorch's step time swings
# with page faults; pstrain's processes set the same at start).
pytorch_openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
[[ -d "$pytorch_openblas" ]] ||
  pytorch_openblas=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp
pytorch_python() {
  LD_LIBRARY_PATH="$pytorch_openblas" \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \
    /usr/bin/python3 "$@"
}

# opt_bin_dir DIR: prints DIR, or when it is empty builds the optimized
# chief, ps and worker and prints the folder holding {chief,ps,worker}/.
opt_bin_dir() {
  if [ -n "$1" ]; then
    echo "$1"
    return
  fi
  bazel build --config=opt //chief //ps //worker >&2 || return 1
  bazel info --config=opt bazel-bin 2>/dev/null
}
