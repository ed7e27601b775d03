# Usage: torchrun --nproc_per_node N scripts/infer_distributed.py [--device cuda|cpu] [--help]
"""Data-parallel inference with alexconv under torchrun: one process per GPU (or CPU processes).

    torchrun --nproc_per_node N scripts/infer_distributed.py [--device cuda|cpu]
        [--model model.pt | --state-dict weights.pt] [--input images.pt | --num-images 1024 --size 224]
        [--batch 64] [--iters 20] [--dtype float32|float16|bfloat16] [--seed 0] [--save out.pt]
        [--json result.json] [--no-check]

Each rank takes a contiguous shard of the inputs (torch.tensor_split: sizes differ by at most 1),
runs ModelNew (or the TorchScript file --model) on it in batches of --batch, and rank 0 gathers
the outputs in input order, checks them against F.conv2d in float64 with the model's own weights
(the README's contract), and can save them. Then every rank times --iters forward passes of one
batch of --batch images (the same per-rank batch whatever the world size, for a scaling figure);
rank 0 reports images/s per rank and in total (all ranks' images over the slowest rank's time).

CUDA: rank r runs on cuda:LOCAL_RANK with NCCL; CPU: gloo (each process gets
--threads threads, default cores / local world size).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import alexconv

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# The contract (README, tests/conftest.py): float32 to 1e-4; the 16-bit types by relative norm.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def make_inputs(num: int, size: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """The same random images on every rank (a CPU generator seeded alike), never zeros."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(num, 3, size, size, generator=g).to(dtype)


def build_model(model_path: str | None, state_dict: str | None, seed: int, device: torch.device):
    if model_path is not None:
        return torch.jit.load(model_path, map_location=device).eval()
    torch.manual_seed(seed)
    model = alexconv.ModelNew()
    if state_dict is not None:
        model.load_state_dict(torch.load(state_dict, map_location="cpu", weights_only=True))
    return model.to(device).eval()


def weights_of(model) -> tuple[torch.Tensor, torch.Tensor | None]:
    """conv1's weight and bias, from ModelNew or a scripted ModelNew alike."""
    conv = model.conv1
    return conv.weight.detach(), (None if conv.bias is None else conv.bias.detach())


def gather_in_order(local: torch.Tensor, counts: list[int], rank: int, world: int) -> torch.Tensor | None:
    """Rank 0 gets every rank's rows in rank order. Shards differ in length, collectives want one
    shape: each rank pads to the longest shard and rank 0 trims."""
    longest = max(counts)
    padded = local.new_zeros((longest, *local.shape[1:]))
    padded[:local.shape[0]] = local
    parts = [torch.empty_like(padded) for _ in range(world)] if rank == 0 else None
    dist.gather(padded, parts, dst=0)
    if rank != 0:
        return None
    return torch.cat([p[:n] for p, n in zip(parts, counts)])


def check(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
          chunk: int = 128) -> str:
    """The gathered outputs against F.conv2d in float64 on the model's device (cuDNN and ATen
    convolve float64 too), a chunk of images at a time to bound the memory."""
    dev = weight.device
    w, b = weight.double(), None if bias is None else bias.double()
    tol = TOLERANCE[out.dtype]
    max_abs, err_sq, ref_sq, close = 0.0, 0.0, 0.0, True
    for o, xi in zip(out.split(chunk), x.split(chunk)):
        ref = F.conv2d(xi.to(dev, torch.float64), w, b, stride=4, padding=2)
        if o.shape != ref.shape:
            raise SystemExit(f"MISMATCH: gathered output {tuple(out.shape)}, reference for {tuple(x.shape)} "
                             f"has another shape")
        o = o.to(dev, torch.float64)
        err = o - ref
        max_abs = max(max_abs, err.abs().max().item())
        err_sq += err.square().sum().item()
        ref_sq += ref.square().sum().item()
        close = close and torch.allclose(o, ref, atol=tol, rtol=tol)
    rel = (err_sq / ref_sq) ** 0.5 if ref_sq > 0 else err_sq ** 0.5
    # float32: every element within atol + rtol * |ref|; the 16-bit types: the relative norm.
    ok = close if out.dtype == torch.float32 else rel <= tol
    summary = f"max abs error {max_abs:.3g}, rel norm error {rel:.3g}"
    if not ok:
        raise SystemExit(f"MISMATCH: gathered outputs differ from the float64 reference: {summary} (tol {tol})")
    return f"OK: gathered outputs match the float64 reference ({summary}, tol {tol})"


def throughput(model, batch: int, hw: tuple[int, int], dtype, device, iters: int,
               world: int) -> tuple[float, list[float]]:
    """Seconds every rank spends on iters passes of one batch; the slowest rank's time bounds the total."""
    x = torch.rand(batch, 3, *hw, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with torch.inference_mode():
        model(x)  # warm-up: first-call setup, kernel selection
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            model(x)
        sync()
        elapsed = time.perf_counter() - t0
    times = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
    dist.all_gather(times, torch.tensor([elapsed], dtype=torch.float64, device=device))
    return elapsed, [t.item() for t in times]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", help="a TorchScript file of ModelNew (alexconv-export model.pt)")
    parser.add_argument("--state-dict", help="weights for ModelNew (state_dict of Model or ModelNew)")
    parser.add_argument("--input", help="a tensor [N, 3, H, W] saved with torch.save (default: random images)")
    parser.add_argument("--num-images", type=int, default=1024, help="random images when no --input")
    parser.add_argument("--size", type=int, default=224, help="height and width of the random images")
    parser.add_argument("--batch", type=int, default=64, help="images per forward pass, per rank")
    parser.add_argument("--iters", type=int, default=20, help="timed passes of one batch per rank")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random images and of ModelNew's weights")
    parser.add_argument("--threads", type=int, help="CPU threads per process")
    parser.add_argument("--save", help="rank 0 saves the gathered outputs here (torch.save)")
    parser.add_argument("--json", help="rank 0 writes the throughput figures here")
    parser.add_argument("--no-check", action="store_true", help="skip the float64 check (large inputs)")
    args = parser.parse_args(argv)
    if args.model and args.state_dict:
        parser.error("--model and --state-dict exclude each other")
    if args.batch < 1 or args.iters < 1 or args.num_images < 1 or args.size < 7:
        parser.error("--batch, --iters and --num-images must be >= 1, --size >= 7")
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        parser.error("run me under torchrun (or python -m torch.distributed.run): RANK/WORLD_SIZE are unset")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no CUDA device (use --device cpu for gloo processes)")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} GPUs visible: "
                             "--nproc_per_node must not exceed the GPUs of the host")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // local_world))
        backend = "gloo"
    # device_id binds NCCL's communicator to this rank's GPU from the start.
    extra = {"device_id": device} if args.device == "cuda" else {}
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=5), **extra)
    try:
        run(args, rank, world, device)
    finally:
        dist.destroy_process_group()


def run(args, rank: int, world: int, device: torch.device) -> None:
    model = build_model(args.model, args.state_dict, args.seed, device)
    if args.model is None:
        model = model.to(DTYPES[args.dtype])
    dtype = weights_of(model)[0].dtype  # a TorchScript file keeps the dtype it was saved in
    x = (torch.load(args.input, map_location="cpu", weights_only=True).to(dtype) if args.input
         else make_inputs(args.num_images, args.size, args.seed, dtype))
    shards = torch.tensor_split(x, world)
    counts = [s.shape[0] for s in shards]
    with torch.inference_mode():
        outs = [model(b.to(device)) for b in shards[rank].split(args.batch)] if counts[rank] else []
        local = torch.cat(outs) if outs else torch.empty(0, 96, *_out_hw(x), device=device, dtype=dtype)
    gathered = gather_in_order(local, counts, rank, world)
    if rank == 0:
        gathered = gathered.cpu()
        print(f"world {world} ({args.device}, {dist.get_backend()}): {x.shape[0]} images {tuple(x.shape[1:])} "
              f"in shards {counts} -> output {tuple(gathered.shape)}", flush=True)
        if not args.no_check:
            print(check(gathered, x, *weights_of(model)), flush=True)
        if args.save:
            torch.save(gathered, args.save)

    hw = tuple(x.shape[-2:])
    _, times = throughput(model, args.batch, hw, dtype, device, args.iters, world)
    if rank == 0:
        per_rank = [args.batch * args.iters / t for t in times]
        total = world * args.batch * args.iters / max(times)
        for r, ips in enumerate(per_rank):
            print(f"rank {r}: {ips:.1f} images/s (batch {args.batch}, {args.iters} iters)")
        print(f"total: {total:.1f} images/s over {world} ranks", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"world": world, "device": args.device, "dtype": args.dtype, "batch": args.batch,
                           "height_width": hw, "iters": args.iters, "seconds": times,
                           "images_per_s_per_rank": per_rank, "images_per_s_total": total}, f, indent=1)


def _out_hw(x: torch.Tensor) -> tuple[int, int]:
    return tuple((s + 4 - 11) // 4 + 1 for s in x.shape[-2:])


if __name__ == "__main__":
    main()
