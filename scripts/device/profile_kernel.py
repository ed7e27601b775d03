# Usage: ncu [options] python3 scripts/device/profile_kernel.py [fp32|tf32|fp16|bf16 ...] [--batch N] [--size N]
"""Runs alexconv.conv1 twice per mode (a warm-up, then the profiled call): a target for ncu.

    ncu --clock-control none --kernel-name regex:igemm --launch-skip 1 \
        python scripts/device/profile_kernel.py fp32 [--batch 256] [--size 224]
"""

import argparse

import torch

import alexconv

MODES = {"fp32": (torch.float32, False), "tf32": (torch.float32, True),
         "fp16": (torch.float16, False), "bf16": (torch.bfloat16, False)}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modes", nargs="*", help=f"any of {', '.join(MODES)} (default: all)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    args = parser.parse_args()
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; expected some of {list(MODES)}")
    x32 = torch.rand(args.batch, 3, args.size, args.size, device="cuda")
    w32 = torch.randn(96, 3, 11, 11, device="cuda") * 0.05
    b32 = torch.randn(96, device="cuda")
    for name in args.modes or list(MODES):
        dtype, tf32 = MODES[name]
        x, w, b = x32.to(dtype), w32.to(dtype), b32.to(dtype)
        for _ in range(2):
            alexconv.conv1(x, w, b, allow_tf32=tf32)
    torch.cuda.synchronize()
