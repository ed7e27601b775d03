# Usage: python3 scripts/bench/latency_probe.py   (a CUDA GPU)
"""Splits batch-1 latency into GPU kernel time and per-call host overhead.

    python scripts/bench/latency_probe.py

Times (a) one call at a time with CUDA events (what do_bench sees), (b) 200 calls
back to back (the GPU queue stays full, so host overhead hides), and (c) a CUDA
graph replay of 20 calls (no host work at all), for alexconv and F.conv2d.
"""

import torch
import torch.nn.functional as F

import alexconv


def per_call_ms(fn, reps=200):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def back_to_back_ms(fn, reps=200):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def graph_ms(fn, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / (10 * reps)


def main():
    for batch in (1, 8):
        x = torch.rand(batch, 3, 224, 224, device="cuda")
        w = torch.randn(96, 3, 11, 11, device="cuda") * 0.05
        b = torch.randn(96, device="cuda")
        op = torch.ops.alexconv.conv1.default
        for name, fn in [("alexconv.conv1", lambda: alexconv.conv1(x, w, b)),
                         ("torch.ops...default", lambda: op(x, w, b)),
                         ("F.conv2d", lambda: F.conv2d(x, w, b, stride=4, padding=2))]:
            fn()
            print(f"batch {batch:3d} {name:20s} per call {per_call_ms(fn)*1e3:7.1f} us | "
                  f"back to back {back_to_back_ms(fn)*1e3:7.1f} us | graph {graph_ms(fn)*1e3:7.1f} us")


if __name__ == "__main__":
    main()
