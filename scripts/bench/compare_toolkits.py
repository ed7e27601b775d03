#!/usr/bin/env python3
# Usage: python3 scripts/bench/compare_toolkits.py --build NAME=HARNESS --build NAME=HARNESS [--json F]
"""Two toolkits' builds of the kernels side by side on one GPU, with nn.Conv2d in the same run.

    python3 scripts/bench/compare_toolkits.py --build 11.8=build/h118/alexconv_cuda_harness \
        --build 13.0=build/h13/alexconv_cuda_harness [--shape 256:nchw --shape 128:nhwc:64] \
        [--json benchmarks/h200-toolkits.json]
    # one build at two channel counts (NAME=HARNESS@CHANNELS overrides the shape's count):
    python3 scripts/bench/compare_toolkits.py --build 17=build/h13/alexconv_cuda_harness@17 \
        --build 24=build/h13/alexconv_cuda_harness@24

Each build is the torch-free harness (scripts/dev/build_cuda_harness.sh: CUDA 11.8 for sm_90, CUDA 13
for sm_90a), whose `--time` times every launch path each GPU class plans (natively and as 8.0 /
8.6) at 224x224, cold L2, median of 20. Per shape, class and mode the table gives each build's
fastest path (the one `auto` takes there; test_dispatch.py pins auto's rules) and the ratio to
nn.Conv2d's default call (cuDNN, TF32 allowed as torch's default is), timed here by the same method.
Needs a CUDA GPU; torch for the nn.Conv2d column (without it the column is left out).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|$")


def harness_times(binary: str, batch: int, layout: str, channels: int, filter_: str) -> tuple[str, dict]:
    """{(class, mode): {path: median ms}} from one build's --time table, and its device line."""
    cmd = [binary, "--time", "--time-batch", str(batch), "--time-layout", layout,
           "--time-channels", str(channels)]
    if filter_:
        cmd += ["--filter", filter_]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    device = next((line for line in out.stdout.splitlines() if line.startswith("device:")), "device: ?")
    times: dict = {}
    for line in out.stdout.splitlines():
        m = ROW.match(line.strip())
        if m and m.group(1) != "path" and not m.group(1).startswith("-"):
            path, fit, cls, mode, median = m.group(1), m.group(2), m.group(3), m.group(4), float(m.group(5))
            if path == "direct":  # the tests' plain reference, never auto's choice
                continue
            times.setdefault((cls, mode), {})[f"{path}/{fit}"] = median
    return device, times


def conv2d_times(batch: int, layout: str, channels: int) -> dict:
    """nn.Conv2d's default call per harness mode, cold L2, median ms (torch's defaults: cuDNN
    benchmark off, TF32 convolutions allowed)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    out = {}
    for mode, dtype in (("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        conv = torch.nn.Conv2d(3, channels, 11, stride=4, padding=2).to("cuda", dtype).to(memory_format=fmt)
        x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype).to(memory_format=fmt)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(20)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(20)]
        with torch.no_grad():
            for _ in range(3):
                conv(x)
            for s, e in zip(starts, ends):
                flush.zero_()
                s.record()
                conv(x)
                e.record()
        torch.cuda.synchronize()
        ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
        out[mode] = (ms[9] + ms[10]) / 2
    out["float32+tf32"] = out["float32"]  # the same default call: TF32 is torch's default for convolutions
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, metavar="NAME=HARNESS[@CHANNELS]",
                    help="a toolkit's harness binary, e.g. 11.8=build/h118/alexconv_cuda_harness (two or "
                         "more); @CHANNELS times it at that output channel count instead of the shape's")
    ap.add_argument("--shape", action="append", metavar="BATCH:LAYOUT[:CHANNELS]",
                    help="batch, layout (nchw or nhwc) and output channels (default 96) at 224x224; "
                         "default 256:nchw and 128:nhwc")
    ap.add_argument("--filter", default="", help="only the harness paths whose label holds this (its --filter)")
    ap.add_argument("--json", help="write every time measured here")
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.build]
    if any(len(b) != 2 for b in builds) or len(builds) < 2:
        ap.error("--build NAME=HARNESS[@CHANNELS], at least twice")
    builds = [(name, *(spec.rsplit("@", 1) if "@" in spec else (spec, None))) for name, spec in builds]
    shapes = [(int(f[0]), f[1], int(f[2]) if len(f) > 2 else 96)
              for f in (s.split(":") for s in (args.shape or ["256:nchw", "128:nhwc"]))]
    result = {"builds": {}, "shapes": []}
    references = {}  # (batch, layout, channels): nn.Conv2d's times
    for batch, layout, shape_channels in shapes:
        per_build, reference = {}, {}
        for name, binary, override in builds:
            channels = int(override) if override else shape_channels
            device, per_build[name] = harness_times(binary, batch, layout, channels, args.filter)
            result["builds"][name] = {"harness": binary, "device": device}
            key = (batch, layout, channels)
            if key not in references:
                references[key] = conv2d_times(batch, layout, channels)
            reference[name] = references[key]
        counts = sorted({int(o) if o else shape_channels for _, _, o in builds})
        print(f"\n## batch {batch}, 224x224, {layout}, {'/'.join(map(str, counts))} channels; "
              f"{result['builds'][builds[0][0]]['device']}")
        head = " | ".join(f"{name}: fastest path, ms{', x nn.Conv2d' if reference[name] else ''}"
                          for name, _, _ in builds)
        print(f"| class | mode | {head} | {builds[0][0]} / {builds[-1][0]} |")
        print("|" + "---|" * (3 + len(builds)))
        rows = []
        for key in sorted(per_build[builds[0][0]]):
            cls, mode = key
            cells, best = [], []
            for name, _, _ in builds:
                paths = per_build[name].get(key, {})
                if not paths:
                    cells.append("-")
                    best.append(None)
                    continue
                path, ms = min(paths.items(), key=lambda kv: kv[1])
                ratio = f", {reference[name][mode] / ms:.2f}x" if mode in reference[name] else ""
                cells.append(f"{path} {ms:.3f}{ratio}")
                best.append(ms)
            slower = f"{best[0] / best[-1]:.2f}" if best[0] and best[-1] else "-"
            print(f"| {cls} | {mode} | {' | '.join(cells)} | {slower} |")
            rows.append({"class": cls, "mode": mode,
                         "conv2d_ms": {name: reference[name].get(mode) for name, _, _ in builds},
                         "builds": {name: per_build[name].get(key, {}) for name, _, _ in builds}})
        result["shapes"].append({"batch": batch, "layout": layout, "channels": shape_channels,
                                 "build_channels": {n: int(o) if o else shape_channels for n, _, o in builds},
                                 "rows": rows})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
