#!/usr/bin/env python3
# Usage: python3 scripts/bench/benchmark.py [--quick] [--sizes ...] [--emulate 8.0 8.6 7.5] [--help]
"""Benchmark alexconv.conv1 against cuDNN and torch.compile, side by side, in one process.

The op is AlexNet's first layer: F.conv2d(x, w, b, stride=4, padding=2), x [N,3,H,W], w [96,3,11,11].
Every contender sees the same seeded weights and the same torch.rand input per (size, batch); accuracy
is measured once per contender against an fp64 GPU reference computed from the fp32 master copies, so
fp16/bf16 errors include input/output rounding.

    python scripts/bench/benchmark.py --quick
    python scripts/bench/benchmark.py --sizes 224 227 256 512 --markdown benchmarks/latest.md
    python scripts/bench/benchmark.py --quick --out-channels 64 --relu   # torchvision's AlexNet's conv1 + ReLU
    python scripts/bench/benchmark.py --quick --sizes 227 --padding 0 --relu   # the original AlexNet's
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[2]
C_IN, C_OUT, K, STRIDE, PAD = 3, 96, 11, 4, 2  # PAD: the default of --padding
BASELINE = "nn.Conv2d default"
FLUSH_BYTES = 256 * 2**20  # larger than H100/H200 L2 (50-60 MB), as in KernelBench / triton do_bench


@dataclass
class Contender:
    name: str
    dtype: torch.dtype
    precision: str  # "best cuDNN" is taken among contenders of the same precision, so TF32 never flatters fp32
    family: str  # "alexconv" | "cudnn" | "compile"
    build: Callable[[nn.Conv2d, torch.Tensor], Callable[[], torch.Tensor]]
    tf32: Optional[bool] = None  # None: leave torch's default
    cudnn_benchmark: Optional[bool] = None
    skip: Optional[str] = None  # set up front when the contender cannot run at all


@contextlib.contextmanager
def cudnn_flags(allow_tf32: Optional[bool] = None, benchmark: Optional[bool] = None):
    # Own manager rather than torch.backends.cudnn.flags(): that one resets every flag (enabled=False
    # by default) and touches the new fp32_precision API, which must not be mixed with allow_tf32.
    cudnn = torch.backends.cudnn
    saved = (cudnn.allow_tf32, cudnn.benchmark)
    try:
        if allow_tf32 is not None:
            cudnn.allow_tf32 = allow_tf32
        if benchmark is not None:
            cudnn.benchmark = benchmark
        yield
    finally:
        cudnn.allow_tf32, cudnn.benchmark = saved


def _cast(conv: nn.Conv2d, x32: torch.Tensor, dtype: torch.dtype, channels_last: bool = False):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = x32.to(dtype=dtype, memory_format=fmt)
    w = conv.weight.detach().to(dtype=dtype, memory_format=fmt)
    return x, w, conv.bias.detach().to(dtype)


def make_contenders(alexconv, compile_modes: list[str], cudnn_benchmark: bool,
                    relu: bool = False) -> list[Contender]:
    """relu: every contender computes relu(conv(x)) -- alexconv fused (relu=True), the others
    as the layer and nn.ReLU in a network run it, a second pass (compile may fuse it)."""
    # Read at startup, i.e. torch's defaults: the baseline is whatever a user gets out of the box.
    default_prec = "fp32/tf32" if torch.backends.cudnn.allow_tf32 else "fp32"
    act = F.relu if relu else (lambda y: y)
    out = [Contender(BASELINE, torch.float32, default_prec, "cudnn", lambda conv, x: (lambda: act(conv(x))))]

    def alex(dtype, tf32=False, channels_last=False):
        def build(conv, x32):
            x, w, b = _cast(conv, x32, dtype, channels_last)
            return lambda: alexconv.conv1(x, w, b, allow_tf32=tf32, padding=conv.padding[0], relu=relu)
        return build

    def cudnn(dtype, channels_last):
        def build(conv, x32):
            x, w, b = _cast(conv, x32, dtype, channels_last)
            return lambda: act(F.conv2d(x, w, b, stride=STRIDE, padding=conv.padding))
        return build

    def compiled(mode):
        def build(conv, x32):
            torch._dynamo.reset()  # one fresh graph per shape instead of hitting the recompile limit
            model = torch.compile(nn.Sequential(conv, nn.ReLU()) if relu else conv, mode=mode, dynamic=False)
            return lambda: model(x32)
        return build

    out += [
        Contender("alexconv fp32", torch.float32, "fp32", "alexconv", alex(torch.float32)),
        Contender("alexconv fp32 tf32", torch.float32, "fp32/tf32", "alexconv", alex(torch.float32, True)),
        Contender("alexconv fp16", torch.float16, "fp16", "alexconv", alex(torch.float16)),
        Contender("alexconv bf16", torch.bfloat16, "bf16", "alexconv", alex(torch.bfloat16)),
        # channels_last input and weight (NHWC output), beside cuDNN's NHWC rows.
        Contender("alexconv fp32 NHWC", torch.float32, "fp32", "alexconv", alex(torch.float32, False, True)),
        Contender("alexconv fp32 tf32 NHWC", torch.float32, "fp32/tf32", "alexconv",
                  alex(torch.float32, True, True)),
        Contender("alexconv fp16 NHWC", torch.float16, "fp16", "alexconv", alex(torch.float16, False, True)),
    ]
    for layout, cl in (("NCHW", False), ("NHWC", True)):
        for tf32 in (False, True):
            out.append(Contender(f"cudnn fp32 {layout}" + (" tf32" if tf32 else ""), torch.float32,
                                 "fp32/tf32" if tf32 else "fp32", "cudnn", cudnn(torch.float32, cl),
                                 tf32=tf32, cudnn_benchmark=cudnn_benchmark))
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        for layout, cl in (("NCHW", False), ("NHWC", True)):
            out.append(Contender(f"cudnn {name} {layout}", dtype, name, "cudnn", cudnn(dtype, cl),
                                 cudnn_benchmark=cudnn_benchmark))
    for mode in compile_modes:
        out.append(Contender(f"compile fp32 {mode}", torch.float32, default_prec, "compile", compiled(mode)))
    return out


# ----------------------------------------------------------------------------------------------- timing
def bench_events(fn, warmup_ms: float, rep_ms: float, flush: Optional[torch.Tensor] = None) -> float:
    """Median ms of fn over CUDA events; same time-budget scheme as triton's do_bench."""
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    torch.cuda.synchronize()
    est = max(start.elapsed_time(end) / 3, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = min(max(10, int(rep_ms / est)), 2000)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        if flush is not None:
            flush.zero_()  # outside the events, so flush time is excluded
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def make_timer(args) -> tuple[Callable[[Callable], float], str]:
    use_triton = args.timer == "triton" or (args.timer == "auto" and not args.cold_l2)
    if use_triton:
        try:
            from triton.testing import do_bench
            return (lambda fn: do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median"),
                    "triton.testing.do_bench median (flushes L2 before every call itself)")
        except ImportError:
            if args.timer == "triton":
                sys.exit("error: --timer triton but triton is not importable")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda") if args.cold_l2 else None
    desc = "CUDA events median, " + ("cold L2 (256 MB flush excluded)" if args.cold_l2 else "warm L2")
    return (lambda fn: bench_events(fn, args.warmup_ms, args.rep_ms, flush)), desc


def measure_bandwidth(timer, gib: float) -> Optional[float]:
    """Device-to-device copy bandwidth in bytes/s (read + write), the practical memory roofline."""
    try:
        src = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = timer(lambda: dst.copy_(src))
        return 2 * src.numel() / (ms * 1e-3)
    except torch.cuda.OutOfMemoryError:
        return None
    finally:
        src = dst = None
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- running
def accuracy(out: torch.Tensor, ref: torch.Tensor, chunk: int = 32) -> tuple[float, float]:
    # Chunked so batch 1024 x size 512 does not need another full fp64 copy of the output.
    max_abs, num, den = 0.0, 0.0, 0.0
    for o, r in zip(out.split(chunk), ref.split(chunk)):
        d = o.double() - r
        max_abs = max(max_abs, d.abs().max().item())
        num += d.square().sum().item()
        den += r.square().sum().item()
    return max_abs, math.sqrt(num / den) if den else float("nan")


def run_contender(c: Contender, conv, x32, ref, timer) -> dict:
    with cudnn_flags(c.tf32, c.cudnn_benchmark):
        fn = c.build(conv, x32)
        out = fn()  # first call pays for compile / cuDNN autotune / lazy library load, untimed
        torch.cuda.synchronize()
        max_abs, rel = accuracy(out, ref) if ref is not None else (None, None)
        out = None
        return {"ms": timer(fn), "max_abs_err": max_abs, "rel_err": rel}


def run_shape(size, batch, contenders, conv, timer, bw, seed, progress, relu=False) -> list[dict]:
    ho = (size + 2 * conv.padding[0] - K) // STRIDE + 1
    c_out = conv.out_channels
    flops = 2 * batch * c_out * ho * ho * C_IN * K * K
    rows, x32, ref = [], None, None
    try:
        torch.manual_seed(seed + size * 7919 + batch)
        x32 = torch.rand(batch, C_IN, size, size, device="cuda")
        ref = F.conv2d(x32.double(), conv.weight.double(), conv.bias.double(), stride=STRIDE, padding=conv.padding)
        ref = F.relu(ref) if relu else ref
    except torch.cuda.OutOfMemoryError:
        ref = None  # no accuracy numbers, timings may still fit
    shape_skip = None if x32 is not None else "OOM allocating input"
    for c in contenders:
        it = c.dtype.itemsize
        nbytes = it * (batch * C_IN * size * size + batch * c_out * ho * ho + c_out * (C_IN * K * K + 1))
        row = {"size": size, "batch": batch, "contender": c.name, "dtype": c.precision, "family": c.family,
               "flops": flops, "bytes": nbytes, "skip": shape_skip or c.skip}
        if row["skip"] is None:
            try:
                row.update(run_contender(c, conv, x32, ref, timer))
            except torch.cuda.OutOfMemoryError:
                row["skip"] = "OOM"
            except Exception as e:  # a broken contender must not stop the others
                first_line = (str(e).strip().splitlines() or [""])[0]
                row["skip"] = f"{type(e).__name__}: {first_line[:120]}"
            torch.cuda.empty_cache()
        if row["skip"] is None:
            s = row["ms"] * 1e-3
            row["tflops"] = flops / s / 1e12
            row["tbps"] = nbytes / s / 1e12
            row["pct_floor"] = nbytes / bw / s * 100 if bw else None
        rows.append(row)
        progress(row)
    x32 = ref = None
    torch.cuda.empty_cache()
    add_speedups(rows)
    return rows


def add_speedups(rows: list[dict]) -> None:
    ok = [r for r in rows if r["skip"] is None]
    base = next((r["ms"] for r in ok if r["contender"] == BASELINE), None)
    best: dict[str, float] = {}
    for r in ok:
        if r["family"] == "cudnn":
            best[r["dtype"]] = min(best.get(r["dtype"], math.inf), r["ms"])
    for r in ok:
        r["speedup_vs_default"] = base / r["ms"] if base else None
        r["speedup_vs_best_cudnn"] = best[r["dtype"]] / r["ms"] if r["dtype"] in best else None


def add_emulated_speedups(rows: list[dict]) -> None:
    """Emulated rows come from children that time alexconv alone: their "vs best cuDNN" is taken
    against this process's cuDNN rows of the same shape and precision (their "vs nn.Conv2d
    default" stays the child's own, measured in its process)."""
    best: dict[tuple, float] = {}
    for r in rows:
        if r["skip"] is None and r["family"] == "cudnn":
            key = (r["size"], r["batch"], r["dtype"])
            best[key] = min(best.get(key, math.inf), r["ms"])
    for r in rows:
        if r["skip"] is None and " [as " in r["contender"]:
            b = best.get((r["size"], r["batch"], r["dtype"]))
            r["speedup_vs_best_cudnn"] = b / r["ms"] if b else None


# -------------------------------------------------------------------------------------------- reporting
def _f(v, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown_table(headers: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def results_table(rows: list[dict]) -> str:
    headers = ["size", "batch", "contender", "dtype", "ms (median)", "vs nn.Conv2d default",
               "vs best cuDNN same dtype", "TFLOP/s", "TB/s", "% mem floor", "rel err", "max abs err"]
    body = []
    for r in rows:
        head = [str(r["size"]), str(r["batch"]), r["contender"], r["dtype"]]
        if r["skip"] is not None:
            body.append(head + [f"skip: {r['skip']}"] + [""] * 7)
            continue
        body.append(head + [_f(r["ms"], ".4f"), _f(r["speedup_vs_default"], ".2f") + "x",
                            _f(r["speedup_vs_best_cudnn"], ".2f") + "x", _f(r["tflops"], ".1f"),
                            _f(r["tbps"], ".2f"), _f(r["pct_floor"], ".1f"), _f(r["rel_err"], ".2e"),
                            _f(r["max_abs_err"], ".2e")])
    return markdown_table(headers, body)


def slowest_cells(rows: list[dict]) -> str:
    """Per GPU class (this GPU, and each emulated one), alexconv's lowest ratio against nn.Conv2d
    default and against cuDNN's best of the same precision over every cell: the "never slower"
    check at a glance."""
    classes: dict[str, list[dict]] = {}
    for r in rows:
        if r["skip"] is None and r["family"] == "alexconv":
            tag = r["contender"].split(" [as ")[1].rstrip("]") if " [as " in r["contender"] else "this GPU"
            classes.setdefault(tag, []).append(r)
    body = []
    for tag, rs in classes.items():
        cells = []
        for key in ("speedup_vs_default", "speedup_vs_best_cudnn"):
            have = [r for r in rs if r.get(key) is not None]
            low = min(have, key=lambda r: r[key], default=None)
            cells.append("n/a" if low is None else
                         f"{low[key]:.2f}x ({low['contender'].split(' [as ')[0]}, {low['size']}, batch {low['batch']})")
        below = sum(1 for r in rs if (r.get("speedup_vs_best_cudnn") or math.inf) < 1.0)
        body.append([tag, str(len(rs))] + cells + [str(below)])
    return "## Slowest cells\n\n" + markdown_table(
        ["class", "cells", "lowest vs nn.Conv2d default", "lowest vs best cuDNN same precision",
         "cells below best cuDNN"], body)


def summary_table(rows: list[dict]) -> str:
    ok = [r for r in rows if r["skip"] is None]
    if not ok:
        return "## Summary\n\nno contender ran"
    key = (224, 256) if any((r["size"], r["batch"]) == (224, 256) for r in ok) else (ok[-1]["size"], ok[-1]["batch"])
    sel = [r for r in rows if (r["size"], r["batch"]) == key]
    body = [[r["contender"], r["dtype"], f"skip: {r['skip']}" if r["skip"] else _f(r["ms"], ".4f"),
             "" if r["skip"] else _f(r["speedup_vs_default"], ".2f") + "x"] for r in sel]
    title = f"## Summary (size {key[0]}, batch {key[1]})\n\n"
    return title + markdown_table(["contender", "dtype", "ms", "vs nn.Conv2d default"], body)


def environment(timer_desc: str, bw: Optional[float]) -> dict:
    def cmd(*argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=REPO).stdout.strip() or None
        except Exception:
            return None
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "triton": triton_version, "python": sys.version.split()[0],
        # --id by UUID: CUDA_VISIBLE_DEVICES renumbers devices but not UUIDs
        "gpu_clocks_mhz (sm, max sm, mem)": cmd("nvidia-smi", f"--id=GPU-{torch.cuda.get_device_properties().uuid}",
                                                 "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem",
                                                 "--format=csv,noheader"),
        # "-dirty" when the measured tree differs from its commit (the device's copy can carry an
        # older .git than the working tree it measures)
        "git": cmd("git", "describe", "--always", "--dirty"), "timer": timer_desc,
        "measured D2D copy bandwidth TB/s (read+write)": round(bw / 1e12, 3) if bw else None,
    }


def write_plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot skipped: matplotlib not importable ({e})", file=sys.stderr)
        return
    sizes = sorted({r["size"] for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 5.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for name in dict.fromkeys(r["contender"] for r in rows):
            pts = sorted((r["batch"], r["ms"]) for r in rows
                         if r["size"] == size and r["contender"] == name and r["skip"] is None)
            if pts:
                style = (dict(lw=2.5) if name.startswith("alexconv") else
                         dict(color="black", lw=2) if name == BASELINE else dict(ls="--", lw=1))
                ax.plot(*zip(*pts), marker="o", label=name, **style)
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="ms (median)", title=f"conv1, {size}x{size}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", help="batch sizes (default 1 8 64 256 1024)")
    p.add_argument("--sizes", type=int, nargs="+", help="input H=W (default 224), e.g. 224 227 256 512")
    p.add_argument("--contenders", nargs="+", metavar="SUBSTR",
                   help=f"keep contenders whose name contains any SUBSTR (case-insensitive); '{BASELINE}' always runs")
    p.add_argument("--quick", action="store_true",
                   help="shorter timing; batch 256 and size 224 unless --batches/--sizes say otherwise")
    p.add_argument("--compile-modes", nargs="+", default=[], metavar="MODE",
                   help="torch.compile modes to run besides 'default', e.g. max-autotune (slow to compile)")
    p.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=True,
                   help=f"cudnn.benchmark=True for the explicit cuDNN contenders (not '{BASELINE}') (default on)")
    p.add_argument("--timer", choices=["auto", "triton", "events"], default="auto",
                   help="auto: triton do_bench if importable, else CUDA events")
    p.add_argument("--cold-l2", action="store_true", help="CUDA-events timer, 256 MB L2 flush before each call")
    p.add_argument("--warmup-ms", type=float, help="warm-up budget per measurement (default 25, quick 10)")
    p.add_argument("--rep-ms", type=float, help="timing budget per measurement (default 200, quick 50)")
    p.add_argument("--bw-gib", type=float, default=2.0, help="copy size for the bandwidth measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-channels", type=int, default=C_OUT,
                   help="the layer's output channels (default 96; torchvision's AlexNet has 64)")
    p.add_argument("--padding", type=int, default=PAD, choices=range(6),
                   help="the layer's padding (default 2; the original AlexNet has 0, at 227x227)")
    p.add_argument("--relu", action="store_true", help="time conv + ReLU (alexconv's relu=True)")
    p.add_argument("--json", type=Path, default=REPO / "benchmarks/latest.json")
    p.add_argument("--plot", type=Path, default=REPO / "benchmarks/latest.png", help="'none': no plot")
    p.add_argument("--markdown", type=Path, help="also write environment + tables to this file")
    p.add_argument("--emulate", nargs="+", default=[], metavar="CC",
                   help="also time alexconv as the dispatcher plans for these GPU classes "
                        "(ALEXCONV_EMULATE_DEVICE, e.g. 8.6 8.0 7.5), one child process each")
    args = p.parse_args(argv)
    args.batches = args.batches or ([256] if args.quick else [1, 8, 64, 256, 1024])
    args.sizes = args.sizes or [224]
    args.warmup_ms = args.warmup_ms or (10.0 if args.quick else 25.0)
    args.rep_ms = args.rep_ms or (50.0 if args.quick else 200.0)
    args.compile_modes = list(dict.fromkeys(["default", *args.compile_modes]))
    return args


def import_alexconv():
    try:
        try:
            import alexconv
        except ModuleNotFoundError:
            sys.path.insert(0, str(REPO))  # run from a checkout without `pip install -e .`
            import alexconv
        return alexconv, None
    except Exception as e:  # not built, or the library fails to load: skip its rows, keep cuDNN's
        return None, f"import alexconv failed: {type(e).__name__}: {e}"


def emulated_rows(cc: str, args) -> list[dict]:
    """alexconv's rows with the dispatcher planning as GPU class `cc`, from a child process (the
    variable is read once per process), named "... [as sm_XY]"; its nn.Conv2d row is dropped."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        cmd = [sys.executable, __file__, "--contenders", "alexconv", "--json", str(out), "--plot", "none",
               "--batches", *map(str, args.batches), "--sizes", *map(str, args.sizes), "--timer", args.timer,
               "--warmup-ms", str(args.warmup_ms), "--rep-ms", str(args.rep_ms), "--seed", str(args.seed),
               "--bw-gib", "0.25", "--out-channels", str(args.out_channels), "--padding", str(args.padding)] + (["--cold-l2"] if args.cold_l2 else []) + (
                   ["--relu"] if args.relu else [])
        env = dict(os.environ, ALEXCONV_EMULATE_DEVICE=cc)
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0 or not out.exists():
            print(f"emulating {cc} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return []
        tag = "sm_" + cc.split(":")[0].replace(".", "")
        rows = [r for r in json.loads(out.read_text())["rows"] if r["contender"] != BASELINE]
        for r in rows:
            r["contender"] += f" [as {tag}]"
        return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("error: CUDA is not available; this benchmark needs an NVIDIA GPU.", file=sys.stderr)
        return 2
    alexconv, alex_err = import_alexconv()
    contenders = make_contenders(alexconv, args.compile_modes, args.cudnn_benchmark, args.relu)
    if args.contenders:
        subs = [s.lower() for s in args.contenders]
        contenders = [c for c in contenders if c.name == BASELINE or any(s in c.name.lower() for s in subs)]
    for c in contenders:
        if c.family == "alexconv" and alex_err:
            c.skip = alex_err  # reported per row rather than aborting: cuDNN numbers are still useful

    timer, timer_desc = make_timer(args)
    bw = measure_bandwidth(timer, args.bw_gib)
    env = environment(timer_desc, bw)
    env["layer"] = f"Conv2d({C_IN}, {args.out_channels}, {K}, stride={STRIDE}, padding={args.padding})" + (
        " + ReLU" if args.relu else "")
    print("# alexconv conv1 benchmark\n")
    print("\n".join(f"- {k}: {v}" for k, v in env.items()) + "\n", flush=True)

    torch.manual_seed(args.seed)
    # == alexconv.Model.conv1 (at 96 channels), default init
    conv = nn.Conv2d(C_IN, args.out_channels, K, stride=STRIDE, padding=args.padding).cuda()
    shapes = [(s, b) for s in args.sizes for b in args.batches]
    total, done, rows = len(shapes) * len(contenders), 0, []

    def progress(r):
        nonlocal done
        done += 1
        what = f"skip: {r['skip']}" if r["skip"] else f"{r['ms']:.4f} ms  rel_err {_f(r['rel_err'], '.2e')}"
        print(f"[{done}/{total}] size {r['size']} batch {r['batch']} {r['contender']}: {what}",
              file=sys.stderr, flush=True)

    with torch.no_grad():
        for size, batch in shapes:
            rows += run_shape(size, batch, contenders, conv, timer, bw, args.seed, progress, args.relu)
    for cc in args.emulate:
        rows += emulated_rows(cc, args)
    add_emulated_speedups(rows)

    table, summary = results_table(rows), slowest_cells(rows) + "\n\n" + summary_table(rows)
    print("\n## Results\n\n" + table + "\n")
    args.plot = None if str(args.plot) == "none" else args.plot
    for path in filter(None, (args.json, args.plot, args.markdown)):
        path.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"env": env, "config": {k: str(v) if isinstance(v, Path) else v
                                                            for k, v in vars(args).items()},
                                     "rows": rows}, indent=1))
    print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        write_plot(rows, args.plot)
    if args.markdown:
        env_md = "\n".join(f"- {k}: {v}" for k, v in env.items())
        args.markdown.write_text(f"# alexconv conv1 benchmark\n\n{env_md}\n\n## Results\n\n{table}\n\n{summary}\n")
        print(f"wrote {args.markdown}", file=sys.stderr)
    print(summary, flush=True)  # last, because only the tail of the output is visible on the device
    return 0


if __name__ == "__main__":
    sys.exit(main())
