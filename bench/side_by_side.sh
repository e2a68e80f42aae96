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

# pstrain_training_rate SUMMARY_JSON: a pstrain run's training examples per
# second: its epochs' examples over their training seconds (summary.json's
# history), the figure to set beside a peer's training loop. Its
# images_per_sec, over the run's wall time, also holds the start, the final
# evaluation and the final checkpoint.
pstrain_training_rate() {
  /usr/bin/python3 -c 'import json, sys
h = json.load(open(sys.argv[1]))["history"]
done = sum(r * t for r, t in zip(h["examples_per_sec"], h["seconds"]))
print(round(done / sum(h["seconds"]), 1))' "$1"
}
