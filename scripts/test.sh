#!/usr/bin/env bash
# Usage: bash scripts/test.sh [pytest arguments, e.g. -k opcheck]
# README's test command: install and build (scripts/demo.sh, the README's other command, with its
# C++ demo), the wheel route, then the whole test suite; one line per stage with its time.
# Extra arguments go to pytest (e.g. scripts/test.sh -k opcheck). Outside CI the tests marked slow
# (whole-network compiles, 2^31-element outputs: about 2 minutes more) are left out, as the
# summary says; ALEXCONV_SLOW_TESTS=1 runs them (tests/conftest.py).
#
# The CUDA compile-only check (scripts/dev/check_cuda_compiles.sh: about 5 minutes on 2 cores) runs
# where nvcc exists and torch has no CUDA, and then only under CI (CI=true), when asked
# (ALEXCONV_CUDA_CHECK=1), or when op/ or tests/cuda_harness has changed: uncommitted changes, or
# a tree other than the one the last passing check saw (scripts/dev/cuda_check_reason.sh decides).
# ALEXCONV_SKIP_CUDA_CHECK=1 skips it outside CI. CI also runs the legacy checks
# (scripts/legacy/check_legacy.sh).
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/dev/stage.sh
mkdir -p build
SECONDS=0

bash scripts/demo.sh

why=$(bash scripts/dev/cuda_check_reason.sh)  # empty: not run here
if [[ -n $why ]]; then
  echo "== cuda     the CUDA compile-only check ($why; about 5 minutes on 2 cores):"
  mkdir -p build/logs
  bash scripts/dev/check_cuda_compiles.sh | tee build/logs/cuda.log
  # The stamp only where it compiled (it skips, passing, without nvcc or where torch has CUDA).
  if grep -q "^== CUDA compile check passed" build/logs/cuda.log; then
    bash scripts/dev/cuda_check_reason.sh --tree > build/cuda-compile-check.passed
  fi
elif [[ "${ALEXCONV_SKIP_CUDA_CHECK:-}" == "1" ]]; then
  echo "== cuda     CUDA compile-only check not run: ALEXCONV_SKIP_CUDA_CHECK=1"
else
  echo "== cuda     CUDA compile-only check not run: not CI, op/ unchanged (ALEXCONV_CUDA_CHECK=1 runs it)"
fi
# CI also checks the oldest supported stack (issue 45, scripts/legacy/check_legacy.sh): the kernels
# compiled by nvcc 11.8 (2 minutes on 2 cores), the C++ library and demo built and run against
# libtorch 1.13.1 (1.5 minutes with downloads), and this suite on torch 1.13.1 with Python 3.9
# in a Debian bullseye chroot (6 minutes, creating it included); plus installing the CUDA 11.8
# toolkit. Outside CI: run it by hand (python113 needs root).
if [[ "${CI:-}" == "true" ]]; then
  echo "== legacy   torch 1.13.1 / CUDA 11.8 checks (scripts/legacy/check_legacy.sh; CI only):"
  bash scripts/legacy/check_legacy.sh cuda118 libtorch113 python113
fi
stage wheel "the wheel route: pip wheel, installed into a fresh venv, the op run there (scripts/dev/check_wheel.sh)" \
  bash scripts/dev/check_wheel.sh
if [[ "${CI:-}" == "true" || "${ALEXCONV_SLOW_TESTS:-}" == "1" ]]; then
  echo "== pytest   the whole suite, the tests marked slow included (${SECONDS} s so far):"
else
  echo "== pytest   the whole suite but the tests marked slow (CI runs them; ALEXCONV_SLOW_TESTS=1 here), about 2.5 minutes on 2 cores (${SECONDS} s so far):"
fi
# pytest exits 5 when it collected no test: that fails here like any other non-zero code.
# Skips are summed up by reason at the end (tests/conftest.py); -ra lists each one.
exec "$PYTHON" -m pytest -q "$@"
