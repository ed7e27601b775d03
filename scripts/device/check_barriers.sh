#!/usr/bin/env bash
# Usage: bash scripts/device/check_barriers.sh [LIBRARY]   (default: the installed libalexconv.so)
# Each implicit-GEMM kernel (conv1_igemm_kernel, conv1_s2d_kernel, conv1_s2d_mma_sync_kernel) must hold exactly one CTA-wide reduction barrier
# (BAR.RED, from __syncthreads_or at the end of its prologue) in its SASS. ptxas
# can split it into one copy per warp role (consumers and producers reaching
# different copies); a build where it did hung every fp32 call on the device,
# while a one-copy build of the same logic ran (docs/perf-notes.md, v8).
#
#   bash scripts/device/check_barriers.sh [binary]   (default: the installed libalexconv.so)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
binary=${1:-$(python3 -c "import alexconv; print(alexconv.library_path())")}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [[ ! -x $cuobjdump ]]; then echo "== barrier check skipped: no cuobjdump"; exit 0; fi
"$cuobjdump" --dump-sass "$binary" | awk '
  /Function :/ { name = $3; if (name ~ /conv1_(igemm|s2d|s2d_mma_sync)_kernel/) count[name] = 0 }
  /BAR\.RED/ && (name in count) { count[name]++ }
  END {
    kernels = 0; bad = 0
    for (k in count) { kernels++; if (count[k] != 1) { bad++; print "  " count[k] " BAR.RED in " k } }
    if (kernels == 0) { print "no implicit-GEMM kernels in the binary"; exit 1 }
    printf "%d implicit-GEMM kernels, %d with other than one BAR.RED\n", kernels, bad
    exit bad > 0
  }'
