"""torch.distributed: DDP training with the op, and the torchrun inference tool.

DDP runs 2 processes (gloo on CPU; NCCL on 2 GPUs where there are 2) spawned on loopback
with a free port and a deadline; its parameters after a few SGD steps must match training in
one process on the same global batches.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import alexconv
from conftest import HAS_CUDA, assert_matches_reference

REPO = pathlib.Path(__file__).resolve().parents[1]
WORLD = 2
STEPS, GLOBAL_BATCH, SIZE, CLASSES, LR = 4, 8, 35, 10, 0.5
DEADLINE_S = 240  # a hung collective fails the test instead of the CI job
# Keep gloo on loopback whatever the host's interfaces are.
LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}


def _distributed_params():
    reason = None if dist.is_available() else "torch was built without torch.distributed"
    nccl_reason = reason or (
        None if HAS_CUDA and torch.cuda.device_count() >= WORLD and dist.is_nccl_available()
        else f"NCCL DDP needs {WORLD} CUDA GPUs and NCCL (found "
             f"{torch.cuda.device_count() if HAS_CUDA else 0} GPUs)")
    return [
        pytest.param("cpu", id="gloo-cpu",
                     marks=[pytest.mark.skipif(reason is not None, reason=str(reason))]),
        pytest.param("cuda", id="nccl-cuda",
                     marks=[pytest.mark.cuda, pytest.mark.skipif(nccl_reason is not None, reason=str(nccl_reason))]),
    ]


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it); a race with another process is unlikely."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Net(nn.Module):
    """ModelNew (the op) with a small classifier head."""

    def __init__(self):
        super().__init__()
        self.features = alexconv.ModelNew()
        self.head = nn.Linear(96, CLASSES)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(F.relu(self.features(x)), 1).flatten(1))


def _train(model, batches, device, rank=0, world=1):
    """SGD on each global batch; a rank takes its contiguous share. The loss is the mean over
    the rank's share: DDP averages gradients over ranks, so with equal shares the update is
    that of the mean loss over the global batch, which one process computes directly."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for x, y in batches:
        share = x.shape[0] // world
        xs, ys = (t[rank * share:(rank + 1) * share].to(device) for t in (x, y))
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        opt.step()


def _worker(rank, device, port, state, batches, out_path):
    torch.set_num_threads(1)  # 2 processes on 2 cores
    torch.backends.cudnn.allow_tf32 = False  # the gradients' convolutions in exact float32
    if device == "cuda":
        torch.cuda.set_device(rank)
    dev = torch.device(device, rank) if device == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=DEADLINE_S // 2))
    ddp = None
    try:
        model = Net().to(dev)
        model.load_state_dict(state)
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank] if device == "cuda" else None)
        _train(ddp, batches, dev, rank, WORLD)
        if rank == 0:
            torch.save({k: v.cpu() for k, v in model.state_dict().items()}, out_path)
        # Teardown once both ranks are past their last collective, with DDP's reducer (which holds
        # the group) gone first: once, on a 2-core CI run, a gloo rank aborted at teardown
        # ("terminate called without an active exception", SIGABRT; not reproduced in 20 runs).
        dist.barrier()
    finally:
        del ddp
        dist.destroy_process_group()


def _spawn(fn, args):
    """mp.spawn with a deadline: a worker that hangs is killed and the test fails."""
    ctx = mp.start_processes(fn, args=args, nprocs=WORLD, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                raise TimeoutError(f"DDP workers still running after {DEADLINE_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


@pytest.mark.parametrize("device", _distributed_params())
def test_ddp_matches_single_process(device, tmp_path, monkeypatch):
    for k, v in LOOPBACK_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)  # as in the workers
    init = {k: v.clone() for k, v in Net().state_dict().items()}  # fresh init (seeded by conftest)
    batches = [(torch.rand(GLOBAL_BATCH, 3, SIZE, SIZE), torch.randint(0, CLASSES, (GLOBAL_BATCH,)))
               for _ in range(STEPS)]
    out = tmp_path / "ddp.pt"
    _spawn(_worker, (device, free_port(), init, batches, str(out)))
    ddp = torch.load(out, weights_only=True)

    dev = torch.device(device)
    single = Net().to(dev)
    single.load_state_dict(init)
    _train(single, batches, dev)
    # Control: training on rank 0's half alone. The tolerance must tell it from the real thing.
    half = Net().to(dev)
    half.load_state_dict(init)
    _train(half, [(x[:GLOBAL_BATCH // WORLD], y[:GLOBAL_BATCH // WORLD]) for x, y in batches], dev)

    # Same arithmetic up to float32 summation order (a rank's partial sums plus the all-reduce
    # against one sum over the batch): ~1e-7 relative per gradient, carried through a few SGD
    # steps. Measured on CPU: at most 2e-7 apart, while training moves the weights by 2e-2 or more
    # and the half-data control lands 3e-2 or more away; atol 1e-5 sits between, with room for
    # cuDNN's and NCCL's own summation orders.
    for name, p in single.state_dict().items():
        p = p.cpu()
        moved = (p - init[name]).abs().max().item()
        assert moved > 1e-3, f"{name} barely trained ({moved:.2e}): the comparison would prove nothing"
        torch.testing.assert_close(ddp[name], p, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
    differs = max((half.state_dict()[k].cpu() - v).abs().max().item() for k, v in ddp.items())
    assert differs > 1e-3, f"training on half the data lands within {differs:.2e} of DDP"


def _run_torchrun(args, timeout=DEADLINE_S):
    """torchrun in its own process group, so that a hang kills it and its workers."""
    env = {**os.environ, **LOOPBACK_ENV, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(WORLD),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           str(REPO / "scripts" / "infer_distributed.py"), *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout} s:\n{stdout}\n{stderr}")
    return proc.returncode, stdout, stderr


def _infer_distributed():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import infer_distributed
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return infer_distributed


def test_infer_distributed_check_can_fail():
    # The tool's float64 check passes the model's own output and rejects it one element off.
    tool = _infer_distributed()
    model = tool.build_model(None, None, 0, torch.device("cpu"))
    x = torch.rand(3, 3, 27, 31)
    with torch.no_grad():
        out = model(x)
    assert tool.check(out, x, *tool.weights_of(model)).startswith("OK")
    out[2, 95, 3, 4] += 1e-3
    with pytest.raises(SystemExit, match="MISMATCH"):
        tool.check(out, x, *tool.weights_of(model), chunk=2)


def test_infer_distributed_needs_torchrun():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "infer_distributed.py"), "--device", "cpu"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and "run me under torchrun" in res.stderr, res.stderr


@pytest.mark.skipif(not dist.is_available(), reason="torch was built without torch.distributed")
@pytest.mark.parametrize("model_kind", ["modelnew", "torchscript"])
def test_infer_distributed_matches_single_process(tmp_path, fresh_seed, model_kind):
    infer_distributed = _infer_distributed()
    seed = fresh_seed % 2**31
    # 7 images over 2 ranks: uneven shards (4 + 3), each in batches of 2 (a short last one).
    args = ["--device", "cpu", "--num-images", 7, "--size", 39, "--batch", 2, "--iters", 2,
            "--seed", seed, "--save", tmp_path / "out.pt"]
    model = infer_distributed.build_model(None, None, seed, torch.device("cpu"))
    if model_kind == "torchscript":
        path = tmp_path / "model.pt"
        torch.jit.script(model).save(str(path))
        args += ["--model", path]
    rc, stdout, stderr = _run_torchrun(args)
    assert rc == 0, stdout + stderr
    assert "OK: gathered outputs match the float64 reference" in stdout, stdout
    assert "images/s" in stdout, stdout

    gathered = torch.load(tmp_path / "out.pt", weights_only=True)
    x = infer_distributed.make_inputs(7, 39, seed, torch.float32)
    with torch.no_grad():
        single = model(x)
    assert gathered.shape == single.shape == (7, 96, 9, 9)
    # Same kernel on the same images: the split into shards and batches must not change them
    # beyond the CPU kernel's own rounding (1e-6 relative against outputs of order 1).
    torch.testing.assert_close(gathered, single, atol=1e-6, rtol=1e-6)
    assert_matches_reference(gathered, x, model.conv1.weight.detach(), model.conv1.bias.detach())
