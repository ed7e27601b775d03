#!/usr/bin/env bash
# Usage: [KERNELS="auto s2d wgmma"] [SIZES=...] [BATCHES=...] bash scripts/bench/compare_kernels.sh
# Times alexconv with each CUDA kernel path forced, one benchmark process per path
# (ALEXCONV_CUDA_KERNEL is read once per process), for A/B work on the kernels:
#
#   KERNELS="auto s2d wgmma" SIZES="224 227" BATCHES="64 256" bash scripts/bench/compare_kernels.sh
#
# Prints one markdown table per path; JSON per path goes to $OUT (or build/compare).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-build/compare}
mkdir -p "$OUT"
rc=0
for kernel in ${KERNELS:-auto s2d wgmma}; do
  echo "=== ALEXCONV_CUDA_KERNEL=$kernel"
  ALEXCONV_CUDA_KERNEL=$kernel python3 scripts/bench/benchmark.py --quick --contenders alexconv \
    --sizes ${SIZES:-224} --batches ${BATCHES:-256} --json "$OUT/compare-$kernel.json" \
    --markdown "$OUT/compare-$kernel.md" > "$OUT/compare-$kernel.log" 2>&1 || rc=1
  grep -E "^\| *[0-9]+ *\| *[0-9]+ *\| alexconv" "$OUT/compare-$kernel.md" | sed "s/^/$kernel /"
done
exit $rc
