#!/usr/bin/env python3
# Usage: python3 scripts/dev/check_kernel_resources.py [--cuda 11] PTXAS_LOG
"""Every CUDA kernel's resources, per target, from ptxas's -v report (the compile check builds
with it): registers, spills, stack. Fails on a spill no entry of the toolkit's list allows
(KNOWN_SPILLS for CUDA 12+, KNOWN_SPILLS_CUDA11 for CUDA 11.8's ptxas), and on a kernel whose
report is missing.

    python3 scripts/dev/check_kernel_resources.py build/cuda-compile-check/ptxas.log
    python3 scripts/dev/check_kernel_resources.py --cuda 11 build/legacy-cuda118/ptxas.log
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

# Spills measured and accepted, by (kernel-name fragment, target) -> most bytes of spill stores.
# A new spill anywhere else fails the check; so does one larger than listed here.
KNOWN_SPILLS = {
    # The register gather's resident mma.sync TF32 kernels with cp.async staging (Tf32, mma.sync,
    # Staging kCopy4 / kCopy16, FitShape<1, 3>): 44-48 bytes on sm_80-sm_89 since before the portable
    # fits, 56 since the epilogue stores only the weight's output channels (issue 46: one
    # compare per n-tile, in the epilogue, once per tile). What a B200 would run through PTX
    # with allow_tf32; no GPU class plans it otherwise (A100's float32 takes the Halves fit).
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE2ENS1_8FitShapeILi1ELi3E", "*"): 56,
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE1ENS1_8FitShapeILi1ELi3E", "*"): 56,
    # The resident mma.sync 16-bit kernels with element-loaded windows (Half, Staging kLoads,
    # FitShape<1, 3>) on sm_90a: 16 bytes since the 16-bit epilogue decides whether a warp stores
    # all its channels once per tile, in two copies of its store loop (25-37% faster 16-bit
    # kernels, common/epilogue.cuh). Hopper runs wgmma for these; this one only when forced.
    ("mma4HalfILb0EEELNS0_5DTypeE1ELb0ELNS0_7StagingE5ENS1_8FitShapeILi1ELi3E", "sm_90a"): 16,
    ("mma4HalfILb1EEELNS0_5DTypeE2ELb0ELNS0_7StagingE5ENS1_8FitShapeILi1ELi3E", "sm_90a"): 16,
    # The portable space-to-depth kernel's 99 KB fit with column-pair staging (FitShape<2, 3, 2, 384>,
    # Staging kPairs), 16-bit: the producers' third register set of loads in flight (s2d_mma_sync/pair_producers.cuh)
    # costs 4 bytes on sm_86-sm_90a and 28 on sm_80 (whose GPUs take the Whole fit) -- and made it
    # 5% faster (H100 as sm_86, fp16 0.321 -> 0.304 ms, with the spill).
    ("8FitShapeILi2ELi3ELi2ELi384EEELNS0_7StagingE7E", "sm_80"): 28,
    ("8FitShapeILi2ELi3ELi2ELi384EEELNS0_7StagingE7E", "*"): 4,
    # Its Whole fit (A100) with element loads (odd widths, channels_last: Staging kLoads), 16-bit,
    # on sm_80 alone: 28 bytes (the shared element-load producers beside 96 channels' accumulators;
    # 12 with two 512-cell slots, 28 with three of 384).
    ("mma4HalfILb0EEELNS0_5DTypeE1ELi6ENS2_8FitShapeILi1ELi3ELi1ELi384EEELNS0_7StagingE5E", "sm_80"): 28,
    ("mma4HalfILb1EEELNS0_5DTypeE2ELi6ENS2_8FitShapeILi1ELi3ELi1ELi384EEELNS0_7StagingE5E", "sm_80"): 28,
    # Its bf16x3 fit for 99 KB (FitShape<3, 2, 3, 352>: warps of three m-tiles), on sm_80 alone, whose
    # GPUs (163 KB) take the Halves fit instead: 4 bytes. None on sm_86-sm_90a.
    ("mma6Bf16x3ELNS0_5DTypeE0ELi6ENS2_8FitShapeILi3ELi2ELi3ELi352EEE", "sm_80"): 4,
}

# CUDA 11.8's ptxas (scripts/legacy/check_legacy.sh cuda118: sm_80, 86, 89, 90), measured on an H200 by
# the 11.8-built harness against the CUDA 13 build (scripts/bench/compare_toolkits.py,
# benchmarks/h200-toolkits.json).
KNOWN_SPILLS_CUDA11 = {
    # The portable space-to-depth kernel's bf16x3 fit for 99 KB (Thirds: warps of three m-tiles),
    # every target: 4 bytes. As sm_86, float32 batch 256: 0.588 ms against CUDA 13's 0.542 (whose
    # ptxas spills it only on sm_80), the consumer loop as long as CUDA 13's.
    ("mma6Bf16x3ELNS0_5DTypeE0ELi6ENS2_8FitShapeILi3ELi2ELi3ELi352EEE", "*"): 4,
    # The register gather's resident mma.sync kernels with cp.async staging (FitShape<1, 3>, Staging
    # kCopy4 / kCopy16). TF32 (CUDA 13 lists 56 bytes for them): 84 bytes on sm_90, where Hopper
    # without sm_90a runs them only when forced (natively 0.502 ms against CUDA 13's 0.486; auto
    # takes s2d_mma_sync, 0.293), 20 on sm_86 / sm_89, which never plan a resident fit (99 KB).
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE2ENS1_8FitShapeILi1ELi3E", "sm_90"): 84,
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE1ENS1_8FitShapeILi1ELi3E", "sm_90"): 84,
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE2ENS1_8FitShapeILi1ELi3E", "*"): 20,
    ("mma4Tf32ELNS0_5DTypeE0ELb0ELNS0_7StagingE1ENS1_8FitShapeILi1ELi3E", "*"): 20,
    # Their bf16x3 twins, on sm_86 / sm_89 alone (never planned there: no resident fit in 99 KB);
    # none on sm_80 and sm_90, which run them (Hopper natively 0.505 ms against CUDA 13's 0.492).
    ("mma6Bf16x3ELNS0_5DTypeE0ELb0ELNS0_7StagingE2ENS1_8FitShapeILi1ELi3E", "*"): 20,
    ("mma6Bf16x3ELNS0_5DTypeE0ELb0ELNS0_7StagingE1ENS1_8FitShapeILi1ELi3E", "*"): 20,
}

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\w+)'")
PROPERTIES = re.compile(r"Function properties for (\S+)")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")


def parse(text: str) -> dict[tuple[str, str], dict]:
    kernels: dict[tuple[str, str], dict] = {}
    current = properties_of = None
    for line in text.splitlines():
        if m := ENTRY.search(line):
            current = (m.group(1), m.group(2))
            kernels[current] = {}
        elif m := PROPERTIES.search(line):
            # ptxas lists the non-inlined device functions a kernel calls after the kernel's own
            # properties: only the entry's own line describes the entry (a callee's zeros must
            # not overwrite its spill).
            properties_of = m.group(1)
        elif current and properties_of == current[0] and (m := SPILL.search(line)):
            kernels[current].update(stack=int(m.group(1)), spill=int(m.group(2)))
        elif current and (m := USED.search(line)):
            kernels[current]["registers"] = int(m.group(1))
    return kernels


def allowed_spill(name: str, target: str, known: dict | None = None) -> int:
    known = KNOWN_SPILLS if known is None else known
    return max((b for (frag, t), b in known.items() if frag in name and t in ("*", target)), default=0)


def main(path: str, cuda: int = 13) -> int:
    known = KNOWN_SPILLS_CUDA11 if cuda < 12 else KNOWN_SPILLS
    kernels = parse(open(path, errors="replace").read())
    if not kernels:
        print(f"{path}: no ptxas -v report (was the compile check built with -Xptxas=-v?)", file=sys.stderr)
        return 1
    per_target = defaultdict(list)
    problems = []
    for (name, target), r in sorted(kernels.items()):
        if "registers" not in r:
            problems.append(f"{target} {name}: no register report")
            continue
        per_target[target].append(r["registers"])
        limit = allowed_spill(name, target, known)
        if r.get("spill", 0) > limit:
            problems.append(f"{target} {name}: {r['spill']} bytes spill stores (allowed {limit})")
    for target, regs in sorted(per_target.items()):
        spilled = sum(1 for (n, t), r in kernels.items() if t == target and r.get("spill", 0))
        print(f"{target}: {len(regs)} kernels, registers {min(regs)}-{max(regs)}, {spilled} with (known) spills")
    for p in problems:
        print("FAIL", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="ptxas -v output of every kernel file")
    ap.add_argument("--cuda", type=int, default=13, help="the toolkit's major version (11: CUDA 11.8's list)")
    args = ap.parse_args()
    sys.exit(main(args.log, args.cuda))
