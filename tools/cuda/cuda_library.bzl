"""cuda_library: compiles .cu files with nvcc into a cc_library.

Each .cu becomes one object (sm_80 and sm_90 machine code plus compute_90 PTX,
so newer GPUs JIT it).  Without a CUDA toolkit the library is empty and
carries no LOOM_WITH_CUDA define, so callers compile their CPU-only path.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
    "-Xcompiler=-fPIC",
    "-DLOOM_WITH_CUDA=1",
]

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return
    objs = []
    for src in srcs:
        obj = name + "_objs/" + src.replace(".cu", ".o")
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + hdrs + native.glob(["**/*.h", "**/*.cuh"]),
            outs = [obj],
            cmd = " ".join([NVCC] + NVCC_FLAGS + copts + [
                "-I.",
                "-I$(GENDIR)",
                "-c $(location %s)" % src,
                "-o $@",
            ]),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        linkstatic = True,
        **kwargs
    )
