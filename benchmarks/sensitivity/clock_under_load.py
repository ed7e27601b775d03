#!/usr/bin/env python3
"""The SM clock and board power while one alexconv build runs back to back (docs/perf-notes.md,
"The copy engine's share"): the kernels can hold the board at its power
limit, where the clock, and so the tensor peak a time is judged against, drops below idle.

Runs the op for --seconds on fresh torch.rand inputs while nvidia-smi samples every 100 ms, then
prints the median clock and power of the samples taken under load and the mean time per call
(CUDA events over the whole run, warm L2: not comparable with do_bench's cold-L2 medians).

    python benchmarks/sensitivity/clock_under_load.py build/libalexconv.so --mode fp16 [--seconds 6]
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
from ab_time import MODES  # noqa: E402  (mode -> dtype name, allow_tf32; scripts/ is not a package)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library")
    ap.add_argument("--mode", choices=MODES, default="fp16")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args()
    torch.ops.load_library(args.library)
    dtype_name, tf32 = MODES[args.mode]
    dtype = getattr(torch, dtype_name)
    conv = nn.Conv2d(3, 96, 11, stride=4, padding=2).cuda()
    x = torch.rand(args.batch, 3, args.size, args.size, device="cuda").to(dtype)
    w, b = conv.weight.detach().to(dtype), conv.bias.detach().to(dtype)

    def call():
        return torch.ops.alexconv.conv1(x, w, b, allow_tf32=tf32)

    call()
    torch.cuda.synchronize()
    sampler = subprocess.Popen(
        ["nvidia-smi", "-i", str(torch.cuda.current_device()), "--query-gpu=clocks.sm,power.draw",
         "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.monotonic()
    start.record()
    while time.monotonic() - t0 < args.seconds:
        for _ in range(50):
            call()
        calls += 50
        torch.cuda.synchronize()  # keeps the host near the device, so samples fall under load
    end.record()
    torch.cuda.synchronize()
    sampler.terminate()
    rows = [line.split(",") for line in sampler.communicate()[0].splitlines() if "," in line]
    # The first second ramps up; the rest is the steady state.
    steady = rows[10:] or rows
    clocks = [float(r[0]) for r in steady]
    power = [float(r[1]) for r in steady]
    print(f"{args.mode} {args.size} batch {args.batch}: {calls} calls, "
          f"{start.elapsed_time(end) / calls:.4f} ms per call; under load SM clock median "
          f"{statistics.median(clocks):.0f} MHz (min {min(clocks):.0f}), power median "
          f"{statistics.median(power):.0f} W ({len(steady)} samples)")


if __name__ == "__main__":
    main()
