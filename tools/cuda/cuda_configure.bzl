"""Detects the CUDA toolkit and exposes it as the repository @local_cuda.

Looks at CUDA_HOME, else /usr/local/cuda.  The toolkit counts as present when
nvcc, the runtime, cuBLAS, cuDNN and NCCL headers are all there; otherwise the
repository still exists but `CUDA_ENABLED` is False and its libraries are
empty, so the same tree builds CPU-only.  LOOM_DISABLE_CUDA=1 forces that.

LOOM_CUDA_EMULATE=1 builds the CUDA backend against loom's CUDA emulator
(tools/cuda/emu) instead: the .cu files compile with g++ and run on the CPU,
so the gpu-tagged tests run on any machine (tools/cuda_emu_test.sh).  Use a
separate --output_base for it: the switch rebuilds everything.

LOOM_CUDA_ARCHS picks the GPUs the kernels are compiled for: compute
capabilities without the dot, comma-separated (default "90": H100/H200).
Each gets machine code, and the highest also PTX, which newer GPUs compile
when they load it.  An A100 needs "80,90"; every extra architecture costs
another pass of nvcc over every .cu file (minutes of a cold CI build).
"""

_REQUIRED_HEADERS = ["cuda_runtime.h", "cublas_v2.h", "cudnn.h", "nccl.h"]

def _find_header(ctx, root, name):
    for d in [root + "/include", "/usr/include", "/usr/include/x86_64-linux-gnu"]:
        if ctx.path(d + "/" + name).exists:
            return d
    return None

def _gencode_flags(archs):
    """-gencode flags for LOOM_CUDA_ARCHS ("80,90"): SASS for each, PTX for the highest."""
    numbers = []
    for a in archs.split(","):
        a = a.strip()
        if not a.isdigit() or len(a) < 2:
            fail("LOOM_CUDA_ARCHS: expected compute capabilities without the dot, " +
                 "comma-separated (e.g. \"80,90\"), got %s" % repr(archs))
        if int(a) not in numbers:
            numbers.append(int(a))
    numbers = sorted(numbers)
    flags = ["-gencode=arch=compute_%d,code=sm_%d" % (n, n) for n in numbers[:-1]]
    top = numbers[-1]
    flags.append("-gencode=arch=compute_%d,code=[sm_%d,compute_%d]" % (top, top, top))
    return flags

def _write_defs(ctx, what, enabled, emulated, root, nvcc, include_dirs, gencode_flags):
    ctx.file("defs.bzl", "\n".join([
        "# Written by cuda_configure: %s." % what,
        "CUDA_ENABLED = %s" % enabled,
        "CUDA_EMULATED = %s" % emulated,
        "CUDA_ROOT = %s" % repr(root),
        "NVCC = %s" % repr(nvcc),
        "# Header folders nvcc needs beyond its own (cuDNN, NCCL may live elsewhere).",
        "CUDA_INCLUDE_DIRS = %s" % repr(include_dirs),
        "# nvcc's -gencode flags for LOOM_CUDA_ARCHS.",
        "CUDA_GENCODE_FLAGS = %s" % repr(gencode_flags),
        "",
    ]))

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    disabled = ctx.os.environ.get("LOOM_DISABLE_CUDA", "0") == "1"
    if not disabled and ctx.os.environ.get("LOOM_CUDA_EMULATE", "0") == "1":
        # @local_cuda as the emulator: its targets forward to //tools/cuda/emu.
        ctx.template("BUILD", Label("//tools/cuda:BUILD.emu.tpl"), {})
        _write_defs(ctx, "loom's CUDA emulator (LOOM_CUDA_EMULATE=1)", True, True, "", "", [], [])
        return
    nvcc = root + "/bin/nvcc"
    include_dirs = []
    found = not disabled and ctx.path(nvcc).exists
    if found:
        for h in _REQUIRED_HEADERS:
            d = _find_header(ctx, root, h)
            if d == None:
                found = False
                break
            if d not in include_dirs:
                include_dirs.append(d)

    if found:
        # Link the shared libraries by name; the toolkit's lib64 is searched
        # at link time and recorded as an rpath for running on this machine.
        lib_dirs = [root + "/lib64", root + "/lib64/stubs", "/usr/lib/x86_64-linux-gnu"]
        ctx.symlink(root + "/include", "cuda_include")
        extra = []
        for i, d in enumerate(include_dirs):
            if d != root + "/include":
                name = "extra_include_%d" % i
                ctx.symlink(d, name)
                extra.append(name)
        ctx.template("BUILD", Label("//tools/cuda:BUILD.cuda.tpl"), {
            "%{includes}": repr(["cuda_include"] + extra),
            "%{hdrs}": repr(["cuda_include/**/*.h", "cuda_include/**/*.hpp", "cuda_include/**/*.cuh",
                        # extension-less headers that cuda_fp16.h (via cuBLAS) includes
                        "cuda_include/nv/**"]),
            "%{linkopts_cudart}": repr(["-L" + root + "/lib64", "-Wl,-rpath," + root + "/lib64", "-lcudart"]),
            "%{linkopts_cublas}": repr(["-L" + root + "/lib64", "-lcublas", "-lcublasLt"]),
            "%{linkopts_cudnn}": repr(["-L" + root + "/lib64", "-L/usr/lib/x86_64-linux-gnu", "-lcudnn"]),
            "%{linkopts_nccl}": repr(["-L" + root + "/lib64", "-L/usr/lib/x86_64-linux-gnu", "-lnccl"]),
            "%{defines}": repr(["LOOM_WITH_CUDA=1"]),
        })
    else:
        ctx.template("BUILD", Label("//tools/cuda:BUILD.cuda.tpl"), {
            "%{includes}": "[]",
            "%{hdrs}": "[]",
            "%{linkopts_cudart}": "[]",
            "%{linkopts_cublas}": "[]",
            "%{linkopts_cudnn}": "[]",
            "%{linkopts_nccl}": "[]",
            "%{defines}": "[]",
        })
    _write_defs(
        ctx,
        "what this machine has",
        found,
        False,
        root if found else "",
        nvcc if found else "",
        include_dirs if found else [],
        _gencode_flags(ctx.os.environ.get("LOOM_CUDA_ARCHS", "90")),
    )

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME", "LOOM_CUDA_ARCHS", "LOOM_CUDA_EMULATE", "LOOM_DISABLE_CUDA"],
    local = True,
)
