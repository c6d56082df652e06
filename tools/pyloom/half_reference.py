"""PyTorch's float16/bfloat16 conversions, for loom's bit-exact tests.

  python3 half_reference.py make out.safetensors
      writes every float16 and bfloat16 bit pattern with its float32 value,
      and a set of float32 inputs (ties, overflow edges, subnormals, NaNs,
      random bits) with their float16 and bfloat16 roundings
  python3 half_reference.py check loom.safetensors
      reads what loom converted ("to_f16", "to_bf16" from "f32"; "f16_as_f32",
      "bf16_as_f32" from "f16", "bf16") and compares every bit with PyTorch;
      prints OK, or the first mismatches and exits 1
  python3 half_reference.py promote
      prints "a b result" for every pair of dtypes (torch.promote_types)
"""
import sys

import torch

from loom_torch import load_safetensors, save_safetensors

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
          "float16": torch.float16, "bfloat16": torch.bfloat16}


def bits16(t):
    return t.view(torch.int16).to(torch.int32) & 0xFFFF


def bits32(t):
    return t.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def float32_inputs():
    """float32 values around every rounding decision of both 16-bit types."""
    patterns = torch.arange(65536, dtype=torch.int64)
    parts = []
    # bfloat16: every upper half with low halves below, at and above the tie.
    for low in (0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF):
        parts.append((patterns << 16) | low)
    # float16: every float16 value in float32, and offsets around its tie
    # (normal halves round at bit 12; subnormal ties lie higher, so the
    # midpoints between neighbouring values are added too).
    f16 = patterns.to(torch.int16).view(torch.float16).float()
    finite = f16[torch.isfinite(f16)]
    base = bits32(finite)
    for delta in (0, 0x0FFF, 0x1000, 0x1001, 0x1FFF):
        parts.append(base + delta)
    ordered = torch.sort(finite[finite >= 0]).values.double()
    mids = ((ordered[1:] + ordered[:-1]) / 2).float()
    for m in (mids, -mids):
        b = bits32(m)
        parts += [b, b - 1, b + 1]
    gen = torch.Generator().manual_seed(0)
    parts.append(torch.randint(0, 2**32, (200000,), generator=gen, dtype=torch.int64))
    everything = torch.cat(parts) & 0xFFFFFFFF
    signed = torch.where(everything >= 2**31, everything - 2**32, everything)
    return signed.to(torch.int32).view(torch.float32)


def make(path):
    patterns = torch.arange(65536, dtype=torch.int64).to(torch.int16)
    f16 = patterns.view(torch.float16)
    bf16 = patterns.view(torch.bfloat16)
    f32 = float32_inputs()
    save_safetensors({
        "f16": f16, "f16_as_f32": f16.float(),
        "bf16": bf16, "bf16_as_f32": bf16.float(),
        "f32": f32, "to_f16": f32.to(torch.float16), "to_bf16": f32.to(torch.bfloat16),
    }, path)


def check(path):
    got = load_safetensors(path)
    patterns = torch.arange(65536, dtype=torch.int64).to(torch.int16)
    want = {
        "f16_as_f32": patterns.view(torch.float16).float(),
        "bf16_as_f32": patterns.view(torch.bfloat16).float(),
        "to_f16": got["f32"].to(torch.float16),
        "to_bf16": got["f32"].to(torch.bfloat16),
    }
    bad = 0
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            print("%s: loom wrote %s %s, PyTorch gives %s %s" % (name, g.dtype, tuple(g.shape),
                                                              w.dtype, tuple(w.shape)))
            bad += 1
            continue
        gb = bits32(g) if g.dtype == torch.float32 else bits16(g)
        wb = bits32(w) if w.dtype == torch.float32 else bits16(w)
        wrong = (gb != wb).nonzero().flatten()
        for i in wrong[:5].tolist():
            print("%s[%d]: loom 0x%x, PyTorch 0x%x" % (name, i, gb[i], wb[i]))
        bad += len(wrong)
    if bad:
        print("%d mismatches" % bad)
        return 1
    print("OK")
    return 0


def promote():
    for a, ta in DTYPES.items():
        for b, tb in DTYPES.items():
            result = torch.promote_types(ta, tb)
            name = [k for k, v in DTYPES.items() if v == result][0]
            print(a, b, name)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    elif sys.argv[1] == "promote":
        promote()
    else:
        sys.exit("usage: half_reference.py make|check PATH | promote")
