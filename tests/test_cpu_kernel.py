"""The CPU backend's own structure: bands of output rows and columns, threads, and one
micro-kernel per instruction set, chosen like ATen's own (ATEN_CPU_CAPABILITY overrides)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from conftest import assert_matches_reference, conv1, make_input, make_weight, requires

# Bands are up to 8 output rows by 64 columns (fewer rows when the batch would give each
# thread fewer than four bands) and micro-tiles are 6 output pixels. With one thread these
# output sizes sit on and just past those edges: (N, H, W) -> output rows x columns.
BAND_SHAPES = [
    (1, 35, 259),  # 8 x 64: bands of 2 rows (one image), each 64 columns wide
    (1, 39, 263),  # 9 x 65: one row and one column past a band
    (3, 71, 519),  # 17 x 129: three column bands, the last one column wide
    (2, 7, 7),     # 1 x 1: a micro-tile with one real pixel
    (1, 227, 27),  # 56 x 6: one micro-tile per row
    (4, 44, 60),   # 10 x 14: bands of 8 rows, then 2
    (1, 71, 71),   # 17 x 17: bands of 4 rows, then 1
]


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("n,h,w", BAND_SHAPES, ids=lambda v: str(v))
def test_band_edges_match_reference(n, h, w, dtype, layout, threads, restore_threads, generator):
    torch.set_num_threads(threads)
    x = make_input(n, h, w, dtype, "cpu", layout, generator=generator)
    wt, b = make_weight(dtype, "cpu", generator=generator)
    assert_matches_reference(conv1(x, wt, b), x, wt, b)


def test_same_bits_for_any_thread_count(restore_threads, generator):
    """Band heights follow the thread count; each output is still summed in one order."""
    x = make_input(1, 224, 224, generator=generator)
    wt, b = make_weight(generator=generator)
    outs = []
    for threads in (1, 2, 3):
        torch.set_num_threads(threads)
        outs.append(conv1(x, wt, b))
    assert_matches_reference(outs[0], x, wt, b)
    assert all(torch.equal(outs[0], o) for o in outs[1:])


def run_with_capability(capability, *args, timeout=900):
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=os.path.dirname(__file__))


@pytest.mark.slow  # the CPU kernel's tests again in a child process: 8-12 s
@requires("cpu_capability")
def test_baseline_kernel(tmp_path, generator):
    """With ATEN_CPU_CAPABILITY=default the baseline kernel runs, meets the contract on the
    band shapes above, and (where ATen picks AVX2 by default) gives other bits than it."""
    probe = run_with_capability("default", "-c",
                                "import torch; print(torch.backends.cpu.get_cpu_capability())")
    # torch before 2.9 calls x86's default level "NO AVX".
    assert probe.returncode == 0 and probe.stdout.strip() in ("DEFAULT", "NO AVX"), \
        probe.stdout + probe.stderr

    suite = run_with_capability("default", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                __file__, "-k", "not baseline_kernel")
    assert suite.returncode == 0 and " passed" in suite.stdout, suite.stdout[-3000:] + suite.stderr

    x = make_input(1, 100, 100, generator=generator)
    wt, b = make_weight(generator=generator)
    torch.save((x, wt, b), tmp_path / "case.pt")
    saved = run_with_capability("default", "-c", f"""
import torch, alexconv
x, w, b = torch.load({str(tmp_path / 'case.pt')!r})
torch.save(alexconv.conv1(x, w, b), {str(tmp_path / 'out.pt')!r})
""")
    assert saved.returncode == 0, saved.stderr
    baseline = torch.load(tmp_path / "out.pt")
    assert_matches_reference(baseline, x, wt, b)
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        assert not torch.equal(baseline, conv1(x, wt, b)), "the AVX2 kernel did not run by default"
