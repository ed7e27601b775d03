"""Runs alexconv.conv1 once per mode at batch 256, 224x224 (warm-up first): a target for ncu.

    ncu --clock-control none --kernel-name regex:igemm --launch-skip 4 python scripts/profile_kernel.py
"""

import sys

import torch

import alexconv

MODES = {"fp32": (torch.float32, False), "tf32": (torch.float32, True),
         "fp16": (torch.float16, False), "bf16": (torch.bfloat16, False)}

if __name__ == "__main__":
    names = sys.argv[1:] or list(MODES)
    x32 = torch.rand(256, 3, 224, 224, device="cuda")
    w32 = torch.randn(96, 3, 11, 11, device="cuda") * 0.05
    b32 = torch.randn(96, device="cuda")
    for name in names:
        dtype, tf32 = MODES[name]
        x, w, b = x32.to(dtype), w32.to(dtype), b32.to(dtype)
        for _ in range(2):
            alexconv.conv1(x, w, b, allow_tf32=tf32)
    torch.cuda.synchronize()
