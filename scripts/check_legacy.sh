#!/usr/bin/env bash
# Checks against the oldest stack we support (issue: PyTorch 1.13 with CUDA 11.8).
#
#   bash scripts/check_legacy.sh [cuda118]
#
# cuda118: every CUDA kernel compiled with nvcc 11.8 for sm_80, sm_86, sm_89 and sm_90 (CUDA 11.8
# has no sm_90a: its Hopper build runs the portable mma.sync kernels; CMakeLists.txt drops 9.0a
# for nvcc < 12 the same way), then each kernel's registers and spills. nvcc 11.8 is Debian's
# nvidia-cuda-toolkit (bookworm contrib/non-free; it needs g++-11):
#   ALEXCONV_INSTALL_LEGACY=1 bash scripts/check_legacy.sh   installs it with apt (as root).
# A missing tool fails the check, it never skips.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
NVCC118=${NVCC118:-/usr/lib/nvidia-cuda-toolkit/bin/nvcc}
steps=("$@"); [[ ${#steps[@]} -eq 0 ]] && steps=(cuda118)

install_cuda118() {
  cat > /etc/apt/sources.list.d/alexconv-contrib-nonfree.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit g++-11
}

for step in "${steps[@]}"; do
  case $step in
    cuda118)
      if [[ ! -x $NVCC118 ]] && [[ "${ALEXCONV_INSTALL_LEGACY:-}" == "1" ]]; then install_cuda118; fi
      if [[ ! -x $NVCC118 ]] || ! "$NVCC118" --version | grep -q "release 11.8"; then
        echo "nvcc 11.8 not found at $NVCC118: install Debian's nvidia-cuda-toolkit (ALEXCONV_INSTALL_LEGACY=1)" >&2
        exit 1
      fi
      command -v g++-11 >/dev/null || { echo "g++-11 not found (nvcc 11.8's newest host compiler)" >&2; exit 1; }
      out=build/legacy-cuda118
      mkdir -p "$out"
      echo "== CUDA 11.8 compile check: $("$NVCC118" --version | tail -n 1); sm_80, sm_86, sm_89, sm_90"
      SECONDS=0
      gencode=()
      for a in 80 86 89 90; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
      pids=()
      for src in op/cuda/direct/direct.cu op/cuda/common/tma_map.cu op/cuda/igemm/igemm.cu op/cuda/s2d/s2d.cu; do
        name=$(basename "$src" .cu)
        "$NVCC118" -std=c++17 -O3 -ccbin g++-11 "${gencode[@]}" -Xptxas=-v -c "$src" -o "$out/$name.o" \
          > "$out/$name.log" 2>&1 &
        pids+=("$!:$name")
      done
      failed=0
      for entry in "${pids[@]}"; do
        wait "${entry%%:*}" || { echo "FAIL ${entry#*:}:"; tail -n 30 "$out/${entry#*:}.log"; failed=1; }
      done
      [[ $failed == 0 ]] || exit 1
      cat "$out"/*.log > "$out/ptxas.log"
      # Registers and spills per target; CUDA 11.8's ptxas may spill where 13.0's does not, so the
      # report is printed, and only CUDA 13's check (check_cuda_compiles.sh) enforces the list.
      "$PYTHON" scripts/check_kernel_resources.py "$out/ptxas.log" || true
      echo "== CUDA 11.8 compile check passed in ${SECONDS} s" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
