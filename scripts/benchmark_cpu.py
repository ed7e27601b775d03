#!/usr/bin/env python3
"""Benchmark alexconv.conv1's CPU kernel against F.conv2d (oneDNN / ATen) on this machine.

torch.utils.benchmark times every contender in one process on the same seeded inputs (median of
blocked runs after warm-up) and prints its comparison table, then each contender's speed-up over
nn.Conv2d's default (F.conv2d, NCHW, float32) at the same batch and thread count.

    python scripts/benchmark_cpu.py
    python scripts/benchmark_cpu.py --batches 1 8 32 --threads 1 2 --size 224
"""
from __future__ import annotations

import argparse
import os
import platform

import torch
import torch.nn.functional as F
from torch.utils import benchmark

import alexconv

BASELINE = "F.conv2d fp32"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in f if ":" in line)}
        return ", ".join(f"{k} {fields[k]}" for k in ("model name", "cpu family", "model")
                         if k in fields) or platform.machine()
    except OSError:
        return platform.processor() or platform.machine()


def contenders(x, w, b):
    cl = torch.channels_last
    x_cl, w_cl = x.contiguous(memory_format=cl), w.contiguous(memory_format=cl)
    x16, w16, b16 = x.bfloat16(), w.bfloat16(), b.bfloat16()
    return {
        BASELINE: lambda: F.conv2d(x, w, b, stride=4, padding=2),
        "F.conv2d fp32 channels_last": lambda: F.conv2d(x_cl, w_cl, b, stride=4, padding=2),
        "F.conv2d bf16": lambda: F.conv2d(x16, w16, b16, stride=4, padding=2),
        "alexconv fp32": lambda: alexconv.conv1(x, w, b),
        "alexconv fp32 channels_last": lambda: alexconv.conv1(x_cl, w_cl, b),
        "alexconv bf16": lambda: alexconv.conv1(x16, w16, b16),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    p.add_argument("--size", type=int, default=224, help="input H = W")
    p.add_argument("--min-run-time", type=float, default=1.0, help="seconds per measurement")
    args = p.parse_args()

    print(f"{cpu_name()}, {os.cpu_count()} logical CPUs, torch {torch.__version__}, "
          f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"alexconv {alexconv.__version__}")
    gen = torch.Generator().manual_seed(0)
    conv = torch.nn.Conv2d(3, 96, 11, stride=4, padding=2)
    w, b = conv.weight.detach(), conv.bias.detach()
    results, medians = [], {}
    for batch in args.batches:
        x = torch.rand(batch, 3, args.size, args.size, generator=gen)
        for name, fn in contenders(x, w, b).items():
            for threads in args.threads:
                m = benchmark.Timer(
                    "fn()", globals={"fn": fn}, num_threads=threads, label="conv1 CPU",
                    sub_label=name, description=f"batch {batch}").blocked_autorange(
                        min_run_time=args.min_run_time)
                print(f"  {name:28s} batch {batch:4d} threads {threads}: {m.median * 1e3:9.3f} ms",
                      flush=True)
                results.append(m)
                medians[name, batch, threads] = m.median
    compare = benchmark.Compare(results)
    compare.print()
    print(f"speed-up over {BASELINE} (same batch and threads):")
    for (name, batch, threads), t in medians.items():
        if name != BASELINE:
            print(f"  {name:28s} batch {batch:4d} threads {threads}: "
                  f"{medians[BASELINE, batch, threads] / t:5.2f}x")


if __name__ == "__main__":
    main()
