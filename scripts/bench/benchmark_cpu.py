#!/usr/bin/env python3
# Usage: python3 scripts/bench/benchmark_cpu.py [--batches ...] [--dtypes ...] [--threads ...] [--help]
"""Benchmark alexconv.conv1 on CPU against F.conv2d (oneDNN / ATen) in both layouts.

For each batch and dtype, times alexconv and F.conv2d with NCHW and with channels_last input and
weight (torch.utils.benchmark: the median of blocked runs after warm-up, every contender in one
process on the same seeded inputs, repeated in --rounds interleaved rounds whose medians are
medianed again, as the CI machines are shared; glibc's allocator warmed up first, see
--cold-allocator). Prints the CPU and its features, the path
alexconv.conv1_kernel names for each dtype, the load average before and after, and a table with
each alexconv layout's ratio to the best F.conv2d layout of the same dtype (> 1: alexconv faster).

    python scripts/bench/benchmark_cpu.py
    python scripts/bench/benchmark_cpu.py --batches 1 8 32 --dtypes float32 bfloat16 --threads 2 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics

import torch
import torch.nn.functional as F
from torch.utils import benchmark

import alexconv

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# The CPU features that decide a path (op/cpu/conv1_cpu.cpp) or oneDNN's speed, as /proc/cpuinfo
# names them.
FEATURES = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni",
            "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16"]


def cpu_info() -> dict:
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    fields.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    name = ", ".join(f"{k} {fields[k]}" for k in ("model name", "cpu family", "model") if k in fields)
    return {"name": name or platform.processor() or platform.machine(),
            "logical_cpus": os.cpu_count(),
            "features": [f for f in FEATURES if f in flags] if flags else None,
            "lacks": [f for f in FEATURES if f not in flags] if flags else None}


def aten_capability() -> str:
    cpu = getattr(torch.backends, "cpu", None)
    return cpu.get_cpu_capability() if hasattr(cpu, "get_cpu_capability") else "unknown (torch < 2.1)"


def fmt(ms):
    return "n/a" if ms is None else f"{ms:.3g}"


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}x"


def contenders(x, w, b, dtype):
    cl = torch.channels_last
    x, w, b = x.to(dtype), w.to(dtype), b.to(dtype)
    x_cl, w_cl = x.contiguous(memory_format=cl), w.contiguous(memory_format=cl)
    return {
        "alexconv NCHW": lambda: alexconv.conv1(x, w, b),
        "alexconv channels_last": lambda: alexconv.conv1(x_cl, w_cl, b),
        "F.conv2d NCHW": lambda: F.conv2d(x, w, b, stride=4, padding=2),
        "F.conv2d channels_last": lambda: F.conv2d(x_cl, w_cl, b, stride=4, padding=2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--size", type=int, default=224, help="input H = W")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per contender")
    p.add_argument("--min-run-time", type=float, default=0.5, help="seconds per contender and round")
    p.add_argument("--json", help="write the rows and the machine's facts here")
    p.add_argument("--cold-allocator", action="store_true",
                   help="skip the allocator warm-up (see below)")
    args = p.parse_args()

    if not args.cold_allocator:
        # glibc maps allocations above its threshold (128 KB at first) anew each time, faulting
        # them in on every call, and raises the threshold to the size of a mapped block once it
        # is freed, up to 32 MB. Without this warm-up F.conv2d NCHW's temporaries stayed above it
        # here: 9.5 against 5.0 ms at batch 8 on 2 cores, a cost of this process's history that a
        # long-running one need not pay. Outputs of 32 MB and more are mapped anew regardless.
        torch.empty(30 << 20, dtype=torch.uint8).fill_(0)  # freed: the threshold becomes 30 MB

    torch.set_num_threads(args.threads)
    cpu = cpu_info()
    probe_x, probe_w = torch.rand(1, 3, args.size, args.size), torch.rand(96, 3, 11, 11)
    paths = {name: alexconv.conv1_kernel(probe_x.to(DTYPES[name]), probe_w.to(DTYPES[name]))
             for name in args.dtypes}
    load_before = os.getloadavg()
    print(f"{cpu['name']}, {cpu['logical_cpus']} logical CPUs, {args.threads} threads, torch {torch.__version__}, "
          f"ATen CPU capability {aten_capability()}, alexconv {alexconv.__version__}")
    if cpu["features"] is not None:
        print(f"features: {' '.join(cpu['features'])}; lacks: {' '.join(cpu['lacks']) or 'none'}")
    print("alexconv path: " + ", ".join(f"{d} {k}" for d, k in paths.items()))
    print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}")

    gen = torch.Generator().manual_seed(0)
    conv = torch.nn.Conv2d(3, 96, 11, stride=4, padding=2)
    w, b = conv.weight.detach(), conv.bias.detach()
    rows = []
    for batch in args.batches:
        x = torch.rand(batch, 3, args.size, args.size, generator=gen)
        for dtype in args.dtypes:
            fns = contenders(x, w, b, DTYPES[dtype])
            missing = []
            for name, fn in list(fns.items()):
                try:
                    fn()
                except RuntimeError as e:  # torch 1.13: no float16 F.conv2d on CPU
                    print(f"  batch {batch:3d} {dtype:9s}: {name} fails: {str(e).splitlines()[0]}")
                    missing.append(name)
                    del fns[name]
            medians = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    m = benchmark.Timer("fn()", globals={"fn": fn}, num_threads=args.threads).blocked_autorange(
                        min_run_time=args.min_run_time)
                    medians[name].append(m.median * 1e3)
            ms = {name: statistics.median(v) for name, v in medians.items()}
            ms.update({name: None for name in missing})
            aten = [ms[n] for n in ("F.conv2d NCHW", "F.conv2d channels_last") if ms[n] is not None]
            best_aten = min(aten) if aten else None

            def ratio(name):
                return best_aten / ms[name] if best_aten is not None and ms[name] is not None else None

            row = {"batch": batch, "dtype": dtype, "ms": ms, "path": paths[dtype],
                   "ratio_nchw": ratio("alexconv NCHW"), "ratio_channels_last": ratio("alexconv channels_last")}
            rows.append(row)
            print(f"  batch {batch:3d} {dtype:9s}: " + ", ".join(f"{n} {fmt(t)}" for n, t in ms.items())
                  + f" ms; ratio to the best F.conv2d {fmt_ratio(row['ratio_nchw'])} / "
                  f"{fmt_ratio(row['ratio_channels_last'])}", flush=True)
    load_after = os.getloadavg()
    print(f"load average after: {' '.join(f'{v:.2f}' for v in load_after)}")

    print("\nms, median of rounds; ratio = best F.conv2d layout / alexconv (> 1: alexconv faster)\n")
    print("| batch | dtype | alexconv NCHW / channels_last | F.conv2d NCHW / channels_last | ratio to the best (NCHW / channels_last) |")
    print("|---|---|---|---|---|")
    for r in rows:
        ms = r["ms"]
        print(f"| {r['batch']} | {SHORT[r['dtype']]} ({r['path']}) | {fmt(ms['alexconv NCHW'])} / "
              f"{fmt(ms['alexconv channels_last'])} | {fmt(ms['F.conv2d NCHW'])} / {fmt(ms['F.conv2d channels_last'])} | "
              f"{fmt_ratio(r['ratio_nchw'])} / {fmt_ratio(r['ratio_channels_last'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "threads": args.threads, "torch": torch.__version__,
                       "aten_cpu_capability": aten_capability(),
                       "size": args.size, "rounds": args.rounds, "min_run_time": args.min_run_time,
                       "warm_allocator": not args.cold_allocator, "load_before": load_before,
                       "load_after": load_after, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
