"""cuda_library: C++ and CUDA sources compiled for the GPUs pstrain targets.

Each .cu file in `srcs` is compiled by nvcc into an object with machine code for
every architecture in CUDA_ARCHS (and PTX for the newest, so later GPUs can JIT
it); the objects and the .cc files in `srcs` form one cc_library linked against
@local_cuda//:cuda. Where the build has no CUDA (no toolkit, or --config=cpu),
the target and everything that depends on it are skipped as incompatible, so
`bazel build //...` and `bazel test //...` still succeed. Name such targets
`*_cuda` (STYLE.md).
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

CUDA_ARCHS = ["80", "90"]

def _gencode_flags():
    flags = ["-gencode arch=compute_%s,code=sm_%s" % (a, a) for a in CUDA_ARCHS]
    newest = CUDA_ARCHS[-1]
    flags.append("-gencode arch=compute_%s,code=compute_%s" % (newest, newest))
    return " ".join(flags)

def cuda_library(name, srcs = [], hdrs = [], deps = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(
            name = name,
            hdrs = hdrs,
            target_compatible_with = ["@platforms//:incompatible"],
            **kwargs
        )
        return
    objects = []
    for src in srcs:
        if not src.endswith(".cu"):
            continue
        obj = "_cuda_objs/%s/%s.o" % (name, src[:-len(".cu")])
        native.genrule(
            name = "%s_nvcc_%s" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-c -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -Wall",
                _gencode_flags(),
                "-I. -I$(GENDIR)",
                "-o $@ $(location %s)" % src,
            ]),
            message = "nvcc " + src,
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects + [s for s in srcs if not s.endswith(".cu")],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        **kwargs
    )
