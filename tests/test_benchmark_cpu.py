"""scripts/bench/benchmark_cpu.py runs end to end (tiny settings: a smoke test, not a timing)."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import CPU_KERNELS

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench" / "benchmark_cpu.py"


def test_benchmark_cpu_smoke(tmp_path):
    out = tmp_path / "cpu.json"
    res = subprocess.run([sys.executable, str(SCRIPT), "--batches", "1", "--size", "32", "--rounds", "1",
                          "--min-run-time", "0.01", "--dtypes", "float32", "bfloat16", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "ratio to the best (NCHW / channels_last)" in res.stdout and "load average before" in res.stdout
    report = json.loads(out.read_text())
    assert [(r["batch"], r["dtype"]) for r in report["rows"]] == [(1, "float32"), (1, "bfloat16")]
    for r in report["rows"]:
        assert r["path"] in CPU_KERNELS and r["ratio_nchw"] > 0 and r["ratio_channels_last"] > 0
        assert set(r["ms"]) == {"alexconv NCHW", "alexconv channels_last", "F.conv2d NCHW", "F.conv2d channels_last"}
