"""scripts/bench/benchmark_alexnet.py runs end to end on CPU (tiny settings: a smoke test, not a timing)."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import CPU_KERNELS

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench" / "benchmark_alexnet.py"


def test_benchmark_alexnet_cpu_smoke(tmp_path):
    out = tmp_path / "alexnet.json"
    res = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--batches", "1",
                          "--agreement-images", "2", "--iters", "1", "--hidden", "64",
                          "--json", str(out), "--markdown", str(tmp_path / "alexnet.md")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "float32 top-1 agreement: 100% everywhere" in res.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["model"].split()[0], r["dtype"], r["batch"]) for r in rows] == [
        ("torchvision", "float32", 1), ("original", "float32", 1)]
    for r in rows:
        assert r["conv1_kernel"] in CPU_KERNELS and r["top1_agreement_pct"] == 100.0
        assert r["max_logit_diff_rel"] < 1e-5 and r["nn_ms"] > 0 and r["alexconv_ms"] > 0
    assert "| conv1 kernel |" in (tmp_path / "alexnet.md").read_text()
