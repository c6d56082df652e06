#!/usr/bin/env python3
"""nvcc for loom's CUDA emulator: compiles a .cu file with the host C++ compiler.

Takes the command line tools/cuda/cuda_library.bzl gives nvcc and keeps what
g++ understands (-I, -isystem, -D, -c, -o, -std); nvcc's own flags
(-gencode, --expt-relaxed-constexpr, -Xcompiler=...) are dropped or unwrapped.
Before compiling, every kernel launch in the .cu and in the .cuh headers of
the workspace it includes is rewritten:

    kernel<T><<<grid, block, shared, stream>>>(a, b)
 -> ::loom_emu::launch(::loom_emu::Config(grid, block, shared, stream).at(__FILE__, __LINE__),
                       [](auto&... loom_emu_args) { kernel<T>(loom_emu_args...); }, a, b)

The rewritten files go to a private folder that comes first on the include
path, so `#include "tensor/cuda/Loops.cuh"` reads the rewritten copy.
loom_emu/Device.h (the device built-ins) is included ahead of everything.
"""

import os
import re
import subprocess
import sys
import tempfile

CXX = os.environ.get("LOOM_CUDA_EMU_CXX", "g++")
HERE = os.path.dirname(os.path.abspath(__file__))


def kernel_start(text, end):
    """Where the kernel expression ending just before `end` begins.

    Walks back over whitespace, balanced <...> template arguments,
    identifiers and :: qualifiers.
    """
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    while True:
        if i > 0 and text[i - 1] == ">":
            depth = 0
            while i > 0:
                c = text[i - 1]
                if c == ">":
                    depth += 1
                elif c == "<":
                    depth -= 1
                i -= 1
                if depth == 0:
                    break
            while i > 0 and text[i - 1].isspace():
                i -= 1
        j = i
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
            j -= 1
        if j == i:
            raise ValueError("no kernel name before <<< at offset %d" % end)
        i = j
        if i >= 2 and text[i - 2:i] == "::":
            i -= 2
            continue
        return i


def matching_paren(text, open_at):
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced parentheses after a launch at offset %d" % open_at)


def rewrite_launches(text):
    out = []
    pos = 0
    while True:
        at = text.find("<<<", pos)
        if at < 0:
            out.append(text[pos:])
            return "".join(out)
        start = kernel_start(text, at)
        close = text.find(">>>", at)
        config = text[at + 3:close]
        k = close + 3
        while text[k].isspace():
            k += 1
        if text[k] != "(":
            raise ValueError("expected ( after >>> at offset %d" % close)
        end = matching_paren(text, k)
        args = text[k + 1:end]
        kernel = text[start:at].strip()
        call = ("::loom_emu::launch(::loom_emu::Config(%s).at(__FILE__, __LINE__), "
                "[](auto&... loom_emu_args) { %s(loom_emu_args...); }%s)"
                % (config, kernel, (", " + args) if args.strip() else ""))
        # Keep the line count so compiler messages point at the right lines.
        call += "\n" * (text.count("\n", start, end + 1) - call.count("\n"))
        out.append(text[pos:start])
        out.append(call)
        pos = end + 1


def main(argv):
    keep = []
    source = output = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-c":
            source = argv[i + 1]
            i += 2
            continue
        if a == "-o":
            output = argv[i + 1]
            i += 2
            continue
        if a in ("-isystem", "-I", "-include"):
            keep += [a, argv[i + 1]]
            i += 2
            continue
        if a.startswith("-Xcompiler="):
            keep += [f for f in a[len("-Xcompiler="):].split(",") if f]
        elif a.startswith(("-I", "-D", "-std=", "-O", "-f", "-W", "-g")):
            keep.append(a)
        # everything else is nvcc's own (-gencode, --expt-relaxed-constexpr)
        i += 1
    if source is None or output is None:
        sys.exit("nvcc_emu: expected -c <file.cu> -o <file.o>")

    with tempfile.TemporaryDirectory() as tmp:
        # The .cu's folder's .cuh headers, rewritten, shadow the originals.
        folder = os.path.dirname(source)
        for name in os.listdir(folder or "."):
            if name.endswith(".cuh"):
                path = os.path.join(folder, name)
                dest = os.path.join(tmp, path)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(path) as f, open(dest, "w") as g:
                    g.write('#line 1 "%s"\n' % path + rewrite_launches(f.read()))
        rewritten = os.path.join(tmp, "main.cpp")
        with open(source) as f, open(rewritten, "w") as g:
            g.write('#line 1 "%s"\n' % source + rewrite_launches(f.read()))
        cmd = [CXX, "-x", "c++", "-std=c++17", "-O2", "-fPIC", "-ffp-contract=off",
               "-Wno-unknown-pragmas", "-I" + tmp] + keep + [
                   "-isystem", os.path.join(HERE, "include"),
                   "-include", "loom_emu/Device.h", "-c", rewritten, "-o", output]
        sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main(sys.argv[1:])
