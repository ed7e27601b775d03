#!/usr/bin/env python3
# Usage: python3 scripts/bench/benchmark_alexnet.py [--device cuda|cpu] [--batches ...] [--help]
"""Whole-model proof (issue 46, item 4): eager nn AlexNets vs the same networks after
alexconv.convert, in one process, same weights, eval mode, no_grad.

Models: torchvision's alexnet() (64 channels, padding 2, 224x224; random weights, never
downloaded), or the local copy of its layout in tests/alexnets.py where torchvision does not
import or --hidden shrinks the classifier; and the original AlexNet (96 channels, padding 0,
227x227, tests/alexnets.py). Per (model, dtype, batch): median ms of both, speedup, the kernel
alexconv.conv1_kernel names for conv1, top-1 agreement on random images (float32 must be 100%:
the exit status is 1 otherwise) and max |logit diff| / max |logit|; and the stem alone
(features[:3]: conv1, ReLU, max-pool, the block a converted model's first layer sits in).

    python scripts/bench/benchmark_alexnet.py --json benchmarks/alexnet.json --markdown benchmarks/alexnet.md
    python scripts/bench/benchmark_alexnet.py --device cpu --batches 1 --agreement-images 2 --iters 1 --hidden 64
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import alexconv

REPO = Path(__file__).resolve().parents[2]


def load(path: Path, name: str):
    """Imports a file by path: tests/ and scripts/ are not packages."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


alexnets = load(REPO / "tests" / "alexnets.py", "_alexnets")


def build_models(hidden: int) -> tuple[list[tuple[str, int, torch.nn.Module]], str]:
    """[(name, input size, nn model)] and where the torchvision layout came from."""
    try:
        import torchvision
        tv_error = None
    except Exception as e:  # CI's CPU machine: torchvision does not import beside its torch
        tv_error = f"{type(e).__name__}: {e}"
    if tv_error is None and hidden == 4096:
        tv, source = torchvision.models.alexnet(weights=None), f"torchvision {torchvision.__version__}"
    else:
        tv = alexnets.TorchvisionAlexNet(hidden=hidden)
        source = "tests/alexnets.py TorchvisionAlexNet (" + (
            f"torchvision not importable: {tv_error}" if tv_error else f"--hidden {hidden}") + ")"
    return [("torchvision (64ch, pad 2, 224)", 224, tv),
            ("original (96ch, pad 0, 227)", 227, alexnets.OriginalAlexNet(hidden=hidden))], source


def make_timer(args):
    """Median ms of fn: as scripts/bench/benchmark.py (do_bench, else CUDA events with L2 flush)."""
    if args.device == "cpu":
        def cpu_timer(fn):
            fn()  # warm-up: first-call allocations and lazy init
            times = []
            for _ in range(args.iters):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            return statistics.median(times)
        return cpu_timer, f"time.perf_counter median of {args.iters} call(s) after 1 warm-up"
    try:
        from triton.testing import do_bench
        return (lambda fn: do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median"),
                "triton.testing.do_bench median (L2 flushed before every call)")
    except ImportError:
        bench = load(REPO / "scripts" / "bench" / "benchmark.py", "_benchmark")
        flush = torch.empty(bench.FLUSH_BYTES, dtype=torch.int8, device=args.device)
        return (lambda fn: bench.bench_events(fn, args.warmup_ms, args.rep_ms, flush),
                "CUDA events median, 256 MB L2 flush before every call (excluded)")


def agreement(nn_model, alex_model, size, batch, dtype, args) -> tuple[float, float]:
    """Top-1 agreement in % and max |logit diff| / max |logit| over --agreement-images
    random N(0, 1) images (normalised ImageNet inputs are about that), fed in `batch`es so that
    each batch's conv1 kernel (it can depend on the batch) is the one checked."""
    gen = torch.Generator(args.device).manual_seed(args.seed + size)
    same, seen, max_diff, max_ref = 0, 0, 0.0, 0.0
    while seen < args.agreement_images:
        n = min(batch, args.agreement_images - seen)
        x = torch.randn(n, 3, size, size, generator=gen, device=args.device).to(dtype)
        ref, out = nn_model(x).float(), alex_model(x).float()
        same += (ref.argmax(1) == out.argmax(1)).sum().item()
        max_diff = max(max_diff, (ref - out).abs().max().item())
        max_ref = max(max_ref, ref.abs().max().item())
        seen += n
    return 100.0 * same / seen, max_diff / max_ref


def environment(args, source, timer_desc) -> dict:
    cuda = args.device == "cuda"
    try:  # the commit benchmarked, where git and the checkout are at hand
        git = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True,
                             text=True).stdout.strip() or None
    except OSError:
        git = None
    return {
        "device": torch.cuda.get_device_name() if cuda else f"cpu {platform.processor() or platform.machine()}"
                                                            f", {torch.get_num_threads()} threads",
        "torch": torch.__version__, "torchvision layout": source, "CUDA": torch.version.cuda,
        "cuDNN": torch.backends.cudnn.version() if cuda else None, "alexconv": alexconv.__file__,
        "git": git, "timer": timer_desc,
        # PyTorch's defaults, left as they are: cuDNN convolutions round fp32 to TF32 where the
        # GPU has it (nn's conv1 too), matmuls do not; the converted conv1 uses convert's allow_tf32.
        "TF32 flags": f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
                      f"cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
                      f"cudnn.benchmark={torch.backends.cudnn.benchmark}; "
                      f"convert(allow_tf32={args.allow_tf32})",
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", type=int, nargs="+", help="default 1 8 64 256 (CUDA), 1 8 (CPU)")
    p.add_argument("--dtypes", nargs="+", choices=["float32", "float16"],
                   help="default float32 float16 (CUDA), float32 (CPU)")
    p.add_argument("--agreement-images", type=int, help="random images for top-1 agreement "
                   "(default 512 on CUDA, 32 on CPU)")
    p.add_argument("--hidden", type=int, default=4096, help="classifier width; not 4096: the local "
                   "torchvision layout (torchvision's alexnet() has no such argument)")
    p.add_argument("--allow-tf32", action="store_true", help="alexconv.convert(allow_tf32=True)")
    p.add_argument("--iters", type=int, default=5, help="CPU: timed calls per measurement")
    p.add_argument("--warmup-ms", type=float, default=25.0, help="CUDA: warm-up budget")
    p.add_argument("--rep-ms", type=float, default=200.0, help="CUDA: timing budget")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        p.error("--device cuda but CUDA is not available")
    args.batches = args.batches or ([1, 8, 64, 256] if cuda else [1, 8])
    args.dtypes = args.dtypes or (["float32", "float16"] if cuda else ["float32"])
    if not cuda and args.dtypes != ["float32"]:
        p.error("on CPU only float32 is timed")
    args.agreement_images = args.agreement_images or (512 if cuda else 32)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)  # the same random weights on every run
    models, source = build_models(args.hidden)
    timer, timer_desc = make_timer(args)
    env = environment(args, source, timer_desc)
    header = "# alexconv: whole AlexNet, eager nn vs alexconv.convert\n\n" + "\n".join(
        f"- {k}: {v}" for k, v in env.items())
    print(header + "\n", flush=True)
    rows = []
    with torch.no_grad():
        for name, size, base in models:
            for dtype_name in args.dtypes:
                dtype = getattr(torch, dtype_name)
                nn_model = copy.deepcopy(base).to(args.device, dtype).eval()
                # inplace=False: a copy with the same weights; its conv1 holds that copy's parameters.
                alex_model, report = alexconv.convert(nn_model, allow_tf32=args.allow_tf32, inplace=False)
                print(f"{name} {dtype_name}: {report}", flush=True)
                conv1 = next(m for m in alex_model.modules() if isinstance(m, alexconv.AlexConv2d))
                for batch in args.batches:
                    x = torch.randn(batch, 3, size, size, device=args.device).to(dtype)
                    kernel = alexconv.conv1_kernel(x, conv1.weight, conv1.bias, allow_tf32=conv1.allow_tf32,
                                                   padding=conv1.padding[0], relu=conv1.relu)
                    nn_ms, alex_ms = timer(lambda: nn_model(x)), timer(lambda: alex_model(x))
                    nn_stem, alex_stem = nn_model.features[:3], alex_model.features[:3]
                    nn_stem_ms, alex_stem_ms = timer(lambda: nn_stem(x)), timer(lambda: alex_stem(x))
                    agree, rel = agreement(nn_model, alex_model, size, batch, dtype, args)
                    rows.append({"model": name, "dtype": dtype_name, "batch": batch, "conv1_kernel": kernel,
                                 "nn_ms": nn_ms, "alexconv_ms": alex_ms, "speedup": nn_ms / alex_ms,
                                 "stem_nn_ms": nn_stem_ms, "stem_alexconv_ms": alex_stem_ms,
                                 "stem_speedup": nn_stem_ms / alex_stem_ms,
                                 "top1_agreement_pct": agree, "agreement_images": args.agreement_images,
                                 "max_logit_diff_rel": rel})
                    print(f"  batch {batch}: nn {nn_ms:.3f} ms, alexconv {alex_ms:.3f} ms ({kernel}), "
                          f"{nn_ms / alex_ms:.2f}x, top-1 {agree:.1f}%, rel diff {rel:.1e}; stem "
                          f"{nn_stem_ms:.3f} / {alex_stem_ms:.3f} ms, {nn_stem_ms / alex_stem_ms:.2f}x", flush=True)
                del nn_model, alex_model, conv1, x
                if args.device == "cuda":
                    torch.cuda.empty_cache()

    table = "\n".join(
        ["| model | dtype | batch | conv1 kernel | nn ms | alexconv ms | speedup | stem (conv, ReLU, "
         "max-pool) nn / alexconv ms | stem speedup | top-1 agreement | max abs logit diff / max abs logit |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
        + [f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['conv1_kernel']} | {r['nn_ms']:.3f} | "
           f"{r['alexconv_ms']:.3f} | {r['speedup']:.2f}x | {r['stem_nn_ms']:.3f} / {r['stem_alexconv_ms']:.3f} | "
           f"{r['stem_speedup']:.2f}x | {r['top1_agreement_pct']:.1f}% "
           f"({r['agreement_images']} images) | {r['max_logit_diff_rel']:.1e} |" for r in rows])
    bad = [r for r in rows if r["dtype"] == "float32" and r["top1_agreement_pct"] < 100.0]
    verdict = ("float32 top-1 agreement: 100% everywhere" if not bad else
               "FAIL: float32 top-1 agreement below 100% for " +
               ", ".join(f"{r['model']} batch {r['batch']}" for r in bad))
    print("\n" + table + "\n\n" + verdict, flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"env": env, "config": config, "rows": rows}, indent=1) + "\n")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(f"{header}\n\n{table}\n\n{verdict}\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
