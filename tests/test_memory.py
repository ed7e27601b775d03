"""Peak memory of a conv1 call against nn.Conv2d's for the same call (issue 66): the op holds no
more than F.conv2d does (its output and, on CUDA, cuDNN's workspace), on every path -- ATen's
convolution inside the op (CUDA planned as sm_75, or forced with ALEXCONV_CUDA_KERNEL=aten or
ALEXCONV_CPU_KERNEL=aten; geometries our CUDA kernels are not built for) and our own kernels,
which hold just the output.

Peak: the most bytes held through torch's allocator during the call, less what was live before
it. CUDA: torch.cuda.max_memory_allocated after reset_peak_memory_stats. CPU: the profiler's
memory events (profile_memory=True), each of which carries the CPU allocator's running total
("Total Allocated"). Our CPU kernel's packed weights (at most 256 x 363 floats) and per-thread
staging (3 x 39 x 263 floats) are plain C++ allocations, which the profiler does not see; what it
does see there is exactly the output.

The kernel variables are read once per process: each configuration is measured in a child (this
file run as a script), the parent judges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from conftest import child_env, make_input, make_weight, requires_cuda  # noqa: E402

# (CPU batch, CUDA batch, size, padding, out_channels, layout, relu): AlexNet's stem as
# torchvision and KernelBench have it (224, pad 2), Caffe's (227, pad 0), one output channel and
# a count our CUDA kernels are not built for (100: ATen's), NCHW and channels_last, with and
# without the fused relu. Small batches on CPU (ATen's float16 convolution there takes a second
# at batch 8): what the call holds beside its output scales with the batch, so these show it too.
CASES = [
    (2, 32, 224, 2, 96, "contiguous", False),
    (2, 32, 224, 2, 96, "channels_last", True),
    (2, 16, 227, 0, 96, "contiguous", True),
    (1, 8, 224, 2, 1, "contiguous", False),
    (1, 8, 224, 2, 100, "channels_last", False),
]
CPU_CASES = [(cpu, *rest) for cpu, _, *rest in CASES]
CUDA_CASES = [(cuda, *rest) for _, cuda, *rest in CASES]
# (name, dtype, allow_tf32): on CUDA the reference runs with torch.backends.cudnn.allow_tf32 set
# as the op's argument, so both reach cuDNN with the same precision (and workspace).
CPU_MODES = [("fp32", torch.float32, False), ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)]
CUDA_MODES = CPU_MODES + [("tf32", torch.float32, True)]


def cuda_peak(call) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = call()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    del out
    return peak


def cpu_peak(call) -> int:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        out = call()
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    del out
    events = [e for e in trace["traceEvents"]
              if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0]
    if not events:
        return 0
    events.sort(key=lambda e: (float(e["ts"]), e["args"].get("Ev Idx", 0)))
    first = events[0]["args"]
    if "Total Allocated" in first:  # the allocator's running total after each event
        before = first["Total Allocated"] - first["Bytes"]
        return max(e["args"]["Total Allocated"] for e in events) - before
    held = peak = 0  # else the events' sizes, summed in time order
    for e in events:
        held += e["args"]["Bytes"]
        peak = max(peak, held)
    return peak


def measure(device: str) -> list:
    """Each case's peaks, as this process's configuration runs it: the op's, F.conv2d's (then
    relu_, in place, where the op fuses relu), and one bare output's (torch.empty)."""
    import alexconv

    cases, modes = (CUDA_CASES, CUDA_MODES) if device == "cuda" else (CPU_CASES, CPU_MODES)
    peak = cuda_peak if device == "cuda" else cpu_peak
    gen = torch.Generator().manual_seed(66)
    records = []
    for batch, size, pad, channels, layout, relu in cases:
        for mode, dtype, tf32 in modes:
            x = make_input(batch, size, size, dtype, device, layout, generator=gen)
            w, b = make_weight(dtype, device, generator=gen, out_channels=channels)

            def op():
                return torch.ops.alexconv.conv1(x, w, b, allow_tf32=tf32, padding=pad, relu=relu)

            def ref():
                cudnn = torch.backends.cudnn
                with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark,
                                 deterministic=cudnn.deterministic, allow_tf32=tf32):
                    y = F.conv2d(x, w, b, stride=4, padding=pad)
                    return y.relu_() if relu else y

            try:
                expected = ref()
            except RuntimeError as e:  # torch 1.13: no float16 convolution (or relu) on CPU
                records.append({"case": [batch, size, pad, channels, layout, relu, mode], "skip": str(e)[:200]})
                continue
            shape, stride = tuple(expected.shape), expected.stride()
            del expected
            for call in (op, ref):  # first calls: cuDNN's plans, oneDNN's primitives, lazy set-up
                call()
            # Measured one after another from the same state of CUDA's caching allocator (each
            # call frees all it took): a bare output right before the op takes the same block.
            record = {"case": [batch, size, pad, channels, layout, relu, mode],
                      "kernel": alexconv.conv1_kernel(x, w, b, allow_tf32=tf32, padding=pad, relu=relu),
                      "ref": peak(ref),
                      "output": peak(lambda: torch.empty_strided(shape, stride, dtype=dtype, device=device))}
            record["op"] = peak(op)
            records.append(record)
    return records


def measured(device: str, **env) -> list:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), device], env=child_env(**env),
                          capture_output=True, text=True, timeout=900, cwd=HERE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def judge(records: list) -> None:
    """Every call at most nn.Conv2d's peak; on our kernels, exactly one output."""
    ran = [r for r in records if "skip" not in r]
    assert ran, records
    table = "\n".join(f"{r['case']} {r['kernel']}: op {r['op']} B, nn.Conv2d {r['ref']} B, output {r['output']} B"
                      for r in ran)
    over = [r for r in ran if r["op"] > r["ref"]]
    assert not over, "the op holds more than nn.Conv2d:\n" + table
    ours = [r for r in ran if r["kernel"] != "aten" and r["op"] != r["output"]]
    assert not ours, "our kernels hold more than their output:\n" + table


@pytest.mark.parametrize("path", ["auto", "aten"])
def test_cpu_peak_memory_at_most_nn_conv2d(path):
    """ATen's convolution inside the op (ALEXCONV_CPU_KERNEL=aten) returns ATen's output as it
    is; our micro-kernels write one."""
    judge(measured("cpu", ALEXCONV_CPU_KERNEL=path))


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("config", [
    pytest.param({}, id="native"),
    pytest.param({"ALEXCONV_EMULATE_DEVICE": "7.5"}, id="as-7.5"),
    pytest.param({"ALEXCONV_CUDA_KERNEL": "aten"}, id="aten"),
])
def test_cuda_peak_memory_at_most_nn_conv2d(config):
    """As sm_75 every call goes to ATen (cuDNN); forced with aten too; natively the geometries our
    kernels are not built for do, the rest run ours, which hold just the output."""
    judge(measured("cuda", **config))


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
