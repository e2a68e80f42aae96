"""pstrain_proto_library: C++ (and gRPC) code from .proto files.

Bazel's native cc_proto_library needs a protobuf source repository, which
cannot be downloaded here, so Debian's protoc and grpc_cpp_plugin are run from a
genrule. Imports are written from the workspace root (`import
"proto/tensor.proto";`), and generated headers are included the same way
(`#include "proto/tensor.pb.h"`).

    pstrain_proto_library(
        name = "ps_service_proto",
        srcs = ["ps_service.proto"],
        deps = [":tensor_proto"],   # other pstrain_proto_library targets
        grpc = True,                # also generate the service stubs
    )
"""

def pstrain_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    stems = [s[:-len(".proto")] for s in srcs]
    outs = [s + ".pb.h" for s in stems] + [s + ".pb.cc" for s in stems]
    if grpc:
        outs += [s + ".grpc.pb.h" for s in stems] + [s + ".grpc.pb.cc" for s in stems]
    pkg = native.package_name()

    # The .proto sources, so that targets depending on this one can import them.
    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + [d + "_srcs" for d in deps],
        visibility = visibility,
    )
    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=$(BINDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    native.genrule(
        name = name + "_gen",
        srcs = [name + "_srcs"],
        outs = outs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(BINDIR) %s %s" % (
            grpc_flags,
            " ".join([pkg + "/" + s for s in srcs]),
        ),
        message = "protoc " + " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
