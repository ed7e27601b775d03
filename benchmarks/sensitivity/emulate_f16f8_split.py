"""Accuracy of a two-MMA float32 split, emulated on the CPU (docs/perf-notes.md, "Two MMAs for
float32"): 2^S x w ~ xh (2^S wh) + xh8 (2^S wl)8 + (2^S xl)8 wh8, with xh, wh
fp16 and the *8 parts e4m3, against F.conv2d in float64, beside today's bf16x3 split
(hi*hi + hi*lo + lo*hi). Each part is rounded as the kernel would round it, then convolved in
float64, so only the operands' rounding is measured, not the accumulation order.

    python benchmarks/sensitivity/emulate_f16f8_split.py [--batch 16]
"""
import argparse

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn


def conv(x, w):
    return F.conv2d(x, w, stride=4, padding=2)


def f16f8_parts(t, scale):
    """fp16 hi, its e4m3 copy, and the e4m3 of the scaled remainder, all as float64."""
    hi = t.to(torch.float16).double()
    lo = t.double() - hi  # exact: t is float32
    hi8 = hi.float().to(E4M3).double()
    lo8 = (lo * scale).float().to(E4M3).double()
    return hi, hi8, lo8


def bf16_parts(t):
    hi = t.to(torch.bfloat16).double()
    lo = (t.double() - hi).float().to(torch.bfloat16).double()
    return hi, lo


def report(name, y, ref):
    err = (y - ref).abs()
    tol = 1e-4 + 1e-4 * ref.abs()  # the float32 contract: allclose(atol=1e-4, rtol=1e-4)
    print(f"  {name:7s} max error {err.max():.3e}  rel. norm error {(y - ref).norm() / ref.norm():.3e}"
          f"  max error / tolerance {(err / tol).max():.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--shift", type=int, default=12, help="S: the corrections' power-of-two scale")
    args = ap.parse_args()
    scale = 2.0 ** args.shift
    for dist in (torch.rand, torch.randn):
        x = dist(args.batch, 3, args.size, args.size)
        layer = torch.nn.Conv2d(3, 96, 11, 4, 2)
        w, b = layer.weight.detach(), layer.bias.detach().double()[None, :, None, None]
        ref = conv(x.double(), w.double()) + b
        print(f"{dist.__name__}, batch {args.batch}, {args.size}x{args.size}:")
        xh, xh8, xl8 = f16f8_parts(x, scale)
        wh, wh8, wl8 = f16f8_parts(w, scale)
        report("f16+e4m3", (conv(xh, wh * scale) + conv(xh8, wl8) + conv(xl8, wh8)) / scale + b, ref)
        xh, xl = bf16_parts(x)
        wh, wl = bf16_parts(w)
        report("bf16x3", conv(xh, wh) + conv(xh, wl) + conv(xl, wh) + b, ref)


if __name__ == "__main__":
    main()
