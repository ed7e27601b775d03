#!/usr/bin/env bash
# Usage: bash scripts/dev/cuda_check_reason.sh [--tree]   (in the repository root)
# Why scripts/test.sh runs the CUDA compile-only check here (printed), or nothing where it does
# not: under CI (CI=true), when asked (ALEXCONV_CUDA_CHECK=1), or when the kernels' sources
# (op/, tests/cuda_harness) have uncommitted changes or differ from what the last passing check
# compiled (its stamp, build/cuda-compile-check.passed). ALEXCONV_SKIP_CUDA_CHECK=1 overrides
# all but CI. Run in the repository root.
#   bash scripts/dev/cuda_check_reason.sh           the reason, or nothing
#   bash scripts/dev/cuda_check_reason.sh --tree    what the stamp records: the kernels' sources now
set -uo pipefail
STAMP=build/cuda-compile-check.passed
tree() {
  { git rev-parse HEAD:op HEAD:tests/cuda_harness; git status --porcelain -- op tests/cuda_harness; } 2>/dev/null
}
if [[ "${1:-}" == "--tree" ]]; then tree; exit 0; fi
if [[ "${CI:-}" == "true" ]]; then echo "CI=true"
elif [[ "${ALEXCONV_SKIP_CUDA_CHECK:-}" == "1" ]]; then :
elif [[ "${ALEXCONV_CUDA_CHECK:-}" == "1" ]]; then echo "ALEXCONV_CUDA_CHECK=1"
elif [[ -n "$(git status --porcelain -- op tests/cuda_harness 2>/dev/null)" ]]; then echo "op/ has uncommitted changes"
elif [[ -f $STAMP ]] && [[ "$(cat "$STAMP")" != "$(tree)" ]]; then echo "op/ changed since the last check"
fi
exit 0
