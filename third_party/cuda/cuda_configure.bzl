"""Detects the CUDA toolkit and makes it the repository @local_cuda.

The toolkit is looked for in $CUDA_PATH, then /usr/local/cuda. It is used when
both bin/nvcc and include/cuda_runtime.h are there, unless PSTRAIN_CUDA=0 is in
the repository environment (`bazel build --config=cpu` sets it). The generated
repository always has:
  - defs.bzl with CUDA_ENABLED (bool), NVCC (path or "") and CUDA_PATH;
  - BUILD with cc_library `cuda` (headers; cudart, cuBLAS, cuDNN, NCCL linked)
    when enabled, and an empty one otherwise, so BUILD files need no select().
"""

def _find_toolkit(ctx):
    if ctx.os.environ.get("PSTRAIN_CUDA", "1") in ["0", "off", "false", "no"]:
        return None, "disabled by PSTRAIN_CUDA=%s" % ctx.os.environ["PSTRAIN_CUDA"]
    candidates = []
    if ctx.os.environ.get("CUDA_PATH"):
        candidates.append(ctx.os.environ["CUDA_PATH"])
    candidates.append("/usr/local/cuda")
    for root in candidates:
        if (ctx.path(root + "/bin/nvcc").exists and
            ctx.path(root + "/include/cuda_runtime.h").exists):
            return root, "found at " + root
    return None, "not found in " + " or ".join(candidates)

def _cuda_configure_impl(ctx):
    root, why = _find_toolkit(ctx)
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    if root == None:
        ctx.file("defs.bzl", "\n".join([
            "# CUDA toolkit " + why + ": CPU-only build.",
            "CUDA_ENABLED = False",
            'NVCC = ""',
            'CUDA_PATH = ""',
            "",
        ]))
        ctx.file("BUILD", "\n".join([
            "# CUDA toolkit " + why + ": CPU-only build.",
            'cc_library(name = "cuda", visibility = ["//visibility:public"])',
            "",
        ]))
        return
    ctx.symlink(root + "/include", "include")
    ctx.file("defs.bzl", "\n".join([
        "# CUDA toolkit " + why + ".",
        "CUDA_ENABLED = True",
        'NVCC = "%s/bin/nvcc"' % root,
        'CUDA_PATH = "%s"' % root,
        "",
    ]))
    ctx.file("BUILD", "\n".join([
        "# CUDA toolkit " + why + ".",
        "cc_library(",
        '    name = "cuda",',
        '    hdrs = glob(["include/**"]),',
        '    includes = ["include"],',
        "    linkopts = [",
        '        "-L%s/lib64",' % root,
        '        "-Wl,-rpath,%s/lib64",' % root,
        '        "-lcudnn",',
        '        "-lcublas",',
        '        "-lnccl",',
        '        "-lcudart",',
        "    ],",
        '    visibility = ["//visibility:public"],',
        ")",
        "",
    ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "PSTRAIN_CUDA"],
    local = True,
)
