"""cuda_library: compiles .cu files with nvcc into a cc_library.

Each .cu becomes one object with machine code for each GPU architecture in
LOOM_CUDA_ARCHS (default sm_90) and PTX of the highest, so newer GPUs JIT it
(tools/cuda/cuda_configure.bzl).  Without a CUDA toolkit the library is empty and
carries no LOOM_WITH_CUDA define, so callers compile their CPU-only path.

nvcc sees the workspace root (-I., so includes read "tensor/Error.h"), the
generated-files root, and the toolkit's header folders (cuda_runtime.h,
cuBLAS, cuDNN, NCCL).  The inputs of each compile are the .cu, `hdrs`, every
.h/.cuh in the folders of the .cu files, and `device_hdrs`: the few headers
elsewhere that device code reads (plain C++: op tables, shapes, dtypes).
Nothing else is visible in the sandbox, so a .cu that includes another
header fails to compile, and editing a header that only host code reads
(Tensor.h, say) leaves every nvcc object cached.
The objects link into the cc_library with @local_cuda//:cudart (libcudart.so
by name, with an rpath to the toolkit), whose LOOM_WITH_CUDA define reaches
every dependent C++ file.
"""

load(
    "@local_cuda//:defs.bzl",
    "CUDA_EMULATED",
    "CUDA_ENABLED",
    "CUDA_GENCODE_FLAGS",
    "CUDA_INCLUDE_DIRS",
    "NVCC",
)

# Under LOOM_CUDA_EMULATE=1 the "nvcc" is tools/cuda/emu/nvcc_emu.py: g++ on
# the .cu files, rewritten for the emulator, whose headers are inputs too.
_EMU_NVCC = "//tools/cuda/emu:nvcc_emu.py"
_EMU_HEADERS = "//tools/cuda/emu:device_headers"

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC",
    "-DLOOM_WITH_CUDA=1",
]

def cuda_library(name, srcs = [], hdrs = [], device_hdrs = [], deps = [], copts = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return
    folders = []
    for src in srcs:
        folder = src.rpartition("/")[0]
        if folder not in folders:
            folders.append(folder)
    headers = list(hdrs)
    patterns = []
    for folder in folders:
        prefix = folder + "/" if folder else ""
        patterns += [prefix + "*.h", prefix + "*.cuh"]
    for h in native.glob(patterns) + device_hdrs:
        if h not in headers:
            headers.append(h)
    compiler = [NVCC]
    extra_srcs = []
    if CUDA_EMULATED:
        compiler = ["python3 $(location %s)" % _EMU_NVCC]
        extra_srcs = [_EMU_NVCC, _EMU_HEADERS]
    objs = []
    for src in srcs:
        obj = name + "_objs/" + src.replace(".cu", ".o")
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + headers + extra_srcs,
            outs = [obj],
            # nvcc names its temporary files after its process id; in
            # Bazel's PID-namespaced sandboxes two parallel compiles share a
            # pid and /tmp, and one deletes the other's files.  A private
            # TMPDIR per compile keeps them apart.
            cmd = "tmp=$$(mktemp -d) && trap 'rm -rf \"$$tmp\"' EXIT && TMPDIR=$$tmp " +
                  " ".join(compiler + NVCC_FLAGS + CUDA_GENCODE_FLAGS + copts + [
                      "-I.",
                      "-I$(GENDIR)",
                  ] + ["-isystem " + d for d in CUDA_INCLUDE_DIRS] + [
                      "-c $(location %s)" % src,
                      "-o $@",
                  ]),
            message = "nvcc " + src,
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
