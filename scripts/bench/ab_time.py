#!/usr/bin/env python3
# Usage: python3 scripts/bench/ab_time.py --cases MODE:SIZE:BATCH ... NAME=LIBRARY ...
"""Times alexconv builds against each other (scripts/bench/ab_builds.sh builds them).

Every library registers the same TORCH_LIBRARY, so each (round, variant) runs in a process of
its own; the rounds alternate the variants so that all of them see the same clock and power
state. Per case: fresh torch.rand input and nn.Conv2d-initialised weights, the error against an
fp64 reference (its first 8 images: an fp64 convolution of a whole batch takes seconds), and
the median time (scripts/bench/benchmark.py's timer: triton's do_bench where importable, else CUDA
events); the table keeps the best median over rounds.

    python scripts/bench/ab_time.py --cases fp32:224:256 fp16:224:8:cl base=build/a/libalexconv.so new=...

A case is mode:size:batch, with :cl appended for a channels_last input (and output), :wcl
for an NCHW input with a channels_last weight (and output).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

MODES = {"fp32": ("float32", False), "tf32": ("float32", True), "fp16": ("float16", False),
         "bf16": ("bfloat16", False)}


def run_worker(library: str, cases: list[str]) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchmark import accuracy, make_timer  # noqa: E402  (scripts/bench/ is not a package)

    timer, _ = make_timer(argparse.Namespace(timer="auto", cold_l2=False, warmup_ms=25.0, rep_ms=200.0))
    torch.ops.load_library(library)
    results = []
    for case in cases:
        mode, size, batch, *layout = case.split(":")
        dtype_name, tf32 = MODES[mode]
        dtype = getattr(torch, dtype_name)
        conv = nn.Conv2d(3, 96, 11, stride=4, padding=2).cuda()
        x = torch.rand(int(batch), 3, int(size), int(size), device="cuda")
        if layout == ["cl"]:
            x = x.contiguous(memory_format=torch.channels_last)
        w, b = conv.weight.detach(), conv.bias.detach()
        if layout == ["wcl"]:
            w = w.contiguous(memory_format=torch.channels_last)
        xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
        out = torch.ops.alexconv.conv1(xd, wd, bd, allow_tf32=tf32)
        ref = F.conv2d(xd[:8].double(), wd.double(), bd.double(), stride=4, padding=2)
        max_abs_err, rel_norm_err = accuracy(out[:8], ref)
        results.append({
            "case": case,
            "ms": timer(lambda: torch.ops.alexconv.conv1(xd, wd, bd, allow_tf32=tf32)),
            "max_abs_err": max_abs_err,
            "rel_norm_err": rel_norm_err,
        })
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="name=path/to/libalexconv.so; the first is the base")
    ap.add_argument("--cases", nargs="+", default=["fp32:224:256"], help="mode:size:batch[:cl|:wcl]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one library, one process
    args = ap.parse_args()
    for case in args.cases:
        fields = case.split(":")
        if len(fields) not in (3, 4) or fields[0] not in MODES or fields[3:] not in ([], ["cl"], ["wcl"]):
            ap.error(f"case {case!r}: expected mode:size:batch[:cl|:wcl] with mode in {sorted(MODES)}")
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.cases)))
        return 0
    if not args.variants:
        ap.error("name at least one variant: name=path/to/libalexconv.so")
    variants = [v.split("=", 1) for v in args.variants]
    runs: dict[str, list[list[dict]]] = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        for name, lib in variants:
            proc = subprocess.run([sys.executable, __file__, "--worker", lib, "--cases", *args.cases],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"variant {name} failed (round {r + 1}):\n{proc.stderr[-3000:]}", file=sys.stderr)
                return 1
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {name}: " + ", ".join(f"{m['ms']:.4f}" for m in runs[name][-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    base = variants[0][0]
    best = {name: [min(run[i]["ms"] for run in rs) for i in range(len(args.cases))] for name, rs in runs.items()}
    print("\n| case | " + " | ".join(name for name, _ in variants) + " | rel. norm error |")
    print("|---" * (len(variants) + 2) + "|")
    for i, case in enumerate(args.cases):
        cells = [f"{best[base][i]:.4f} ms"] + [f"{best[n][i]:.4f} ({best[n][i] / best[base][i]:.3f}x)"
                                                for n, _ in variants[1:]]
        errs = " / ".join(f"{runs[n][0][i]['rel_norm_err']:.1e}" for n, _ in variants)
        print(f"| {case} | " + " | ".join(cells) + f" | {errs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
