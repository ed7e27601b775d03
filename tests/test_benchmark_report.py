"""scripts/bench/benchmark.py's reporting on made-up rows (no GPU): emulated rows are compared with this
process's cuDNN rows of the same shape and precision, and the slowest cells are named per class."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench" / "benchmark.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("alexconv_benchmark_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def row(contender, family, dtype, ms, size=224, batch=1, vs_default=None):
    return {"size": size, "batch": batch, "contender": contender, "family": family, "dtype": dtype,
            "skip": None, "ms": ms, "speedup_vs_default": vs_default, "speedup_vs_best_cudnn": None}


def test_emulated_rows_take_the_best_cudnn_of_their_shape_and_precision(bench):
    rows = [row("cudnn fp16 NCHW", "cudnn", "fp16", 0.04), row("cudnn fp16 NHWC", "cudnn", "fp16", 0.03),
            row("cudnn fp16 NHWC", "cudnn", "fp16", 0.5, batch=8),  # another shape: not this one's
            row("cudnn fp32 NCHW", "cudnn", "fp32", 0.01),  # another precision
            row("alexconv fp16 [as sm_86]", "alexconv", "fp16", 0.06, vs_default=0.9),
            row("alexconv fp16", "alexconv", "fp16", 0.02)]
    bench.add_emulated_speedups(rows)
    assert rows[4]["speedup_vs_best_cudnn"] == pytest.approx(0.5)
    assert rows[5]["speedup_vs_best_cudnn"] is None  # this GPU's rows keep add_speedups' value


def test_slowest_cells_name_the_lowest_ratio_per_class(bench):
    rows = [row("alexconv fp16 [as sm_86]", "alexconv", "fp16", 1.0, batch=1, vs_default=1.5),
            row("alexconv fp32 [as sm_86]", "alexconv", "fp32", 1.0, batch=8, vs_default=0.8),
            row("alexconv fp16", "alexconv", "fp16", 1.0, vs_default=2.0),
            row("cudnn fp16 NCHW", "cudnn", "fp16", 1.0, vs_default=1.0)]
    rows[0]["speedup_vs_best_cudnn"], rows[1]["speedup_vs_best_cudnn"] = 0.9, 3.0
    table = bench.slowest_cells(rows)
    lines = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert "0.80x (alexconv fp32, 224, batch 8)" in lines["sm_86"]
    assert "0.90x (alexconv fp16, 224, batch 1)" in lines["sm_86"]
    assert lines["sm_86"].rstrip(" |").endswith("1")  # one cell below cuDNN's best
    assert "2.00x" in lines["this GPU"] and "n/a" in lines["this GPU"]
    assert "cudnn" not in table
