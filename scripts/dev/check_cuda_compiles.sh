#!/usr/bin/env bash
# Usage: [ALEXCONV_SKIP_CUDA_CHECK=1] bash scripts/dev/check_cuda_compiles.sh
# Compile-only check of the CUDA kernels where torch has no CUDA: the .cu files
# include no torch headers, so nvcc and the CUDA toolkit suffice. Skipped with a
# message when nvcc is absent or ALEXCONV_SKIP_CUDA_CHECK=1, except under CI (CI=true),
# where it always runs. It takes about 5 minutes on 2 cores (325 s measured on a 2-core CPU
# machine with CUDA 13): it says so before it starts. scripts/test.sh runs it only under CI, when
# asked (ALEXCONV_CUDA_CHECK=1) or when op/ changed.
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [[ "${ALEXCONV_SKIP_CUDA_CHECK:-}" == "1" ]]; then
  if [[ "${CI:-}" == "true" ]]; then
    echo "== ALEXCONV_SKIP_CUDA_CHECK=1 ignored: CI always runs the CUDA compile check"
  else
    echo "== CUDA compile check skipped: ALEXCONV_SKIP_CUDA_CHECK=1"; exit 0
  fi
fi
if ! command -v nvcc >/dev/null; then
  if [[ "${CI:-}" == "true" ]]; then echo "nvcc not found: CI needs the CUDA compile check" >&2; exit 1; fi
  echo "== CUDA compile check skipped: no nvcc"; exit 0
fi
if "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)"; then
  echo "== CUDA compile check skipped: torch has CUDA, so the package build compiled the kernels"; exit 0
fi
echo "== CUDA compile check (nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), the default targets of CMakeLists.txt):"
echo "   compile-only, no GPU needed; about 5 minutes on 2 cores: every kernel's registers and spills, then the harness's self-test."
[[ "${CI:-}" == "true" ]] || echo "   Skip it with ALEXCONV_SKIP_CUDA_CHECK=1 (CI never skips it)."
SECONDS=0
# The nvcc found above, by path: CMake's own search may prefer another toolkit (a Debian CUDA 11.8
# in /usr/bin, say; scripts/legacy/check_legacy.sh checks that one).
cmake -S . -B build/cuda-compile-check -G Ninja -DALEXCONV_CUDA=OFF -DALEXCONV_CUDA_COMPILE_CHECK=ON \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
  -DALEXCONV_BUILD_DEMO=OFF -DPython3_EXECUTABLE="$(command -v "$PYTHON")" > build/cuda-compile-check.log 2>&1 \
  || { cat build/cuda-compile-check.log; exit 1; }
# ptxas -v reports every kernel (hundreds of lines): kept in the log, summarised below.
cmake --build build/cuda-compile-check --target alexconv_cuda_kernels --clean-first \
  > build/cuda-compile-check/ptxas.log 2>&1 || { tail -n 60 build/cuda-compile-check/ptxas.log; exit 1; }
"$PYTHON" scripts/dev/check_kernel_resources.py build/cuda-compile-check/ptxas.log
# The wgmma and mma.sync microbenchmarks (benchmarks/micro) share the kernels' arch headers:
# built too, so that they keep compiling as the headers change.
for micro in wgmma_ceiling mma_sync_ceiling; do
  nvcc -std=c++17 -O3 -arch=sm_90a -I op "benchmarks/micro/$micro.cu" -o "build/cuda-compile-check/$micro" \
    > "build/cuda-compile-check/$micro.log" 2>&1 || { cat "build/cuda-compile-check/$micro.log"; exit 1; }
done
echo "== wgmma and mma.sync microbenchmarks compile"
# The standalone harness (tests/cuda_harness) checks the kernels on a GPU against its own float64
# reference and judge; --self-test checks those on the CPU. One target is enough for that (it
# launches no kernel): about a minute and a half more.
harness_dir=build/cuda-harness-ci
OUT_DIR=$harness_dir NVCC="$(command -v nvcc)" ARCHS=80 bash scripts/dev/build_cuda_harness.sh > build/cuda-harness-ci.log 2>&1 \
  || { tail -n 40 build/cuda-harness-ci.log; exit 1; }
"$harness_dir/alexconv_cuda_harness" --self-test > "$harness_dir/self-test.log" 2>&1 \
  || { grep -v "^ok" "$harness_dir/self-test.log" | tail -n 40; exit 1; }
echo "== CUDA harness self-test: $(tail -n 1 "$harness_dir/self-test.log")"
echo "== CUDA compile check passed in ${SECONDS} s"
