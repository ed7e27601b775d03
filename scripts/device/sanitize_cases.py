# Usage: compute-sanitizer --tool TOOL python3 scripts/device/sanitize_cases.py [--many-tiles|--long-runs]
"""Small CUDA cases for compute-sanitizer: ragged sizes, batch 1 and 3, every dtype and mode.

    compute-sanitizer --tool memcheck python scripts/device/sanitize_cases.py
    compute-sanitizer --tool racecheck python scripts/device/sanitize_cases.py --many-tiles

--many-tiles runs larger cases instead, with more tiles than a GPU has multiprocessors,
so the persistent kernels' CTAs take several tiles each and, where the space-to-depth
kernel has two accumulator sets, alternate them: 16 images of 224x224 in float32 (in auto
the register-gather kernel's TMA variant, whose copies have a warp of their own; so has
its TF32 variant, auto's choice for the allow_tf32 case below), 10 of 224x224 in 16 bits and in
float32 with allow_tf32 (its TMA variants, two sets), 10 of 227x227 in 16 bits and in
float32 with allow_tf32 (rows TMA cannot cut: its row-span variants, two sets; auto takes
them too at that batch; the input ends 12 (bf16) or 8 (float32) bytes past a 16-byte boundary), 8 of 256x256
in float32 with allow_tf32 (element loads, two sets), plans of several strips, and
channels_last inputs (their outputs too): in 16 bits and in float32 with allow_tf32 one
copy per tile of its three channels' rows (the 16-bit kernels built for such outputs; at
227 the input ends 8 bytes past a 16-byte boundary), in float32 element loads. --long-runs runs one float32 case of 400
images of 256x256, where the register-gather kernel's CTAs take contiguous runs of over 64
tiles (too long for racecheck; memcheck, with ALEXCONV_CUDA_KERNEL=wgmma: auto takes the
space-to-depth kernel for it on Hopper).

The default cases cycle through paddings and output channel counts (the even paddings the
register gather takes, the odd ones the space-to-depth kernels get, counts that end in a
partial n-tile); the larger ones keep AlexNet's (padding 2, 96 channels).

Each case is checked against the float64 reference too, so a run that the
sanitizer passes but that computes garbage still fails (exit 1).
"""

from __future__ import annotations

import itertools
import sys

import torch
import torch.nn.functional as F

import alexconv

# Ragged sizes; even W takes the 16-bit pair copies; 300x257 has an empty tile (two strips);
# 40x256 has 16-bit TMA boxes wider than 256 columns (the map of 16-byte units).
SHAPES = [(1, 7, 7), (3, 37, 45), (1, 61, 13), (3, 11, 98), (2, 15, 16), (3, 11, 12), (1, 300, 257),
          (1, 40, 1100), (2, 40, 256)]
# (padding, output channels), one per default case in turn: half of them AlexNet's.
GEOMETRIES = [(2, 96), (0, 96), (2, 96), (1, 17), (2, 96), (3, 40), (2, 96), (5, 1), (2, 96), (4, 95),
              (2, 96), (0, 12)]
MODES = [(torch.float32, False), (torch.float32, True), (torch.float16, False), (torch.bfloat16, False)]
MANY_TILES = [((16, 224, 224), (torch.float32, False), "nchw"),
              ((10, 224, 224), (torch.float16, False), "nchw"),
              ((10, 224, 224), (torch.float32, True), "nchw"),
              ((10, 227, 227), (torch.bfloat16, False), "nchw"),
              ((10, 227, 227), (torch.float32, True), "nchw"),
              ((8, 256, 256), (torch.float32, True), "nchw"),
              ((2, 512, 512), (torch.float16, False), "nchw"),
              ((10, 224, 224), (torch.float16, False), "nhwc"),
              ((10, 227, 227), (torch.float32, True), "nhwc"),
              ((6, 224, 224), (torch.float32, False), "nhwc")]
LONG_RUNS = [((400, 256, 256), (torch.float32, True), "nchw")]
LIMITS = {(torch.float32, False): 1e-5, (torch.float32, True): 1e-3,
          (torch.float16, False): 2e-3, (torch.bfloat16, False): 1e-2}


def main() -> int:
    torch.manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))
    failures = 0
    cases = (MANY_TILES if "--many-tiles" in sys.argv[1:]
             else LONG_RUNS if "--long-runs" in sys.argv[1:]
             else itertools.product(SHAPES, MODES, ["nchw", "nhwc", "cropped"]))
    for i, ((n, h, w), (dtype, tf32), layout) in enumerate(cases):
        pad, channels = GEOMETRIES[i % len(GEOMETRIES)] if not sys.argv[1:] else (2, 96)
        if min(h, w) + 2 * pad < 11:  # no output at this padding
            pad = 2
        x = torch.randn(n, 3, h, w, device="cuda").to(dtype)
        if layout == "nhwc":
            x = x.contiguous(memory_format=torch.channels_last)
        elif layout == "cropped":  # 16-byte-aligned rows whose right edge ends inside a copy unit
            x = torch.randn(n, 3, h, (w + 7) // 8 * 8 + 8, device="cuda").to(dtype)[..., :w]
        wt = (torch.randn(channels, 3, 11, 11, device="cuda") * 0.05).to(dtype)
        b = torch.randn(channels, device="cuda").to(dtype)
        out = alexconv.conv1(x, wt, b, allow_tf32=tf32, padding=pad)
        ref = F.conv2d(x.double(), wt.double(), b.double(), stride=4, padding=pad)
        rel = ((out.double() - ref).norm() / ref.norm()).item()
        ok = rel <= LIMITS[(dtype, tf32)]
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} n={n} h={h} w={w} pad={pad} c_out={channels} {dtype} tf32={tf32} "
              f"{layout}: rel {rel:.2e}")
    torch.cuda.synchronize()
    print(f"sanitize cases: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
