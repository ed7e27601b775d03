#!/usr/bin/env bash
# Usage: [ALEXCONV_INSTALL_LEGACY=1] bash scripts/legacy/check_legacy.sh [cuda118] [libtorch113] [python113]
# Checks against the oldest stack we support (issue 45: PyTorch 1.13 with CUDA 11.8).
#
#   bash scripts/legacy/check_legacy.sh [cuda118] [libtorch113] [python113]     (default: cuda118 libtorch113)
#   bash scripts/legacy/legacy_python113.sh [pytest arguments]                  (python113 alone)
#
# cuda118: every CUDA kernel compiled with nvcc 11.8 for sm_80, sm_86, sm_89 and sm_90 with the
#   flags a CMake build passes (line info included: CUDA 11.8's ptxas once crashed on it; CUDA 11.8
#   has no sm_90a: its Hopper build runs the portable kernels; CMakeLists.txt drops 9.0a for nvcc
#   < 12 the same way), then each kernel's registers and spills as CUDA 11.8's own ptxas reports
#   them, judged against CUDA 11's list (scripts/dev/check_kernel_resources.py --cuda 11). 4 minutes
#   on 2 cores.
# libtorch113: the library, alexconv_demo and alexconv_script_model built against libtorch 1.13.1
#   (PyPI's cp310 wheel: headers, CMake package and libraries; pre-C++11 ABI) and run on CPU: a
#   TorchScript ModelNew saved by libtorch 1.13 runs through the dispatcher against at::conv2d in
#   float64 (float32 and bfloat16). 64 s on 2 cores, plus 25 s to download and unpack the wheels
#   the first time (1.4 GB, cached).
# python113: the Python package built and its test suite run on torch 1.13.1 with Python 3.9, in a
#   Debian bullseye chroot (scripts/legacy/legacy_python113.sh). Needs root; 6 minutes on 2 cores when it
#   creates the chroot too (debootstrap and CUDA 11.2 for torch's CMake: 3 of them), 2-3 after.
#
# Tools: nvcc 11.8 is Debian's nvidia-cuda-toolkit (bookworm contrib/non-free; it needs g++-11).
# torch 1.13's CMake package insists on a CUDA toolkit and cuDNN even for a CPU-only build
# (Caffe2Config.cmake): the Debian toolkit, and the headers of PyPI's nvidia-cudnn-cu11 wheel.
#   ALEXCONV_INSTALL_LEGACY=1 bash scripts/legacy/check_legacy.sh   installs what is missing (as root).
# A missing tool fails the check, it never skips. Downloads are cached (sha256-checked) in
# $ALEXCONV_LEGACY_CACHE (default ~/.cache/alexconv-legacy), outside the repository.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PYTHON=${PYTHON:-python3}
NVCC118=${NVCC118:-/usr/lib/nvidia-cuda-toolkit/bin/nvcc}
CACHE=${ALEXCONV_LEGACY_CACHE:-$HOME/.cache/alexconv-legacy}
steps=("$@"); [[ ${#steps[@]} -eq 0 ]] && steps=(cuda118 libtorch113)  # python113 needs root: ask for it

fail() { echo "check_legacy: $*" >&2; exit 1; }

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

# nvcc 11.8 and its own ptxas first on PATH: nvcc runs the ptxas PATH finds, and a newer
# toolkit's (CUDA 13's in /usr/local/bin here) would assemble the 11.8 PTX instead.
use_cuda118() {
  if [[ ! -x $NVCC118 ]] && [[ "${ALEXCONV_INSTALL_LEGACY:-}" == "1" ]]; then install_cuda118; fi
  # Versions read whole, then matched: `tool --version | grep -q` fails under pipefail when grep
  # exits before the tool has written everything (SIGPIPE).
  if [[ ! -x $NVCC118 ]] || [[ "$("$NVCC118" --version)" != *"release 11.8"* ]]; then
    fail "nvcc 11.8 not found at $NVCC118: install Debian's nvidia-cuda-toolkit (ALEXCONV_INSTALL_LEGACY=1)"
  fi
  command -v g++-11 >/dev/null || fail "g++-11 not found (nvcc 11.8's newest host compiler)"
  export PATH="$(dirname "$NVCC118"):/usr/bin:$PATH"
  [[ "$(ptxas --version)" == *"release 11.8"* ]] || fail "ptxas on PATH is not CUDA 11.8's: $(command -v ptxas)"
}

# fetch_wheel REQUIREMENT SHA256: PyPI's manylinux wheel (any Python: only its files are used)
# into the cache, once; prints its path.
fetch_wheel() {
  local req=$1 sha=$2 whl
  whl=$(ls "$CACHE"/wheels/"${req%%==*}"-"${req##*==}"-*.whl 2>/dev/null | head -n 1 || true)
  if [[ -z $whl ]]; then
    mkdir -p "$CACHE/wheels"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.10 \
      --platform manylinux1_x86_64 --require-hashes -r <(echo "$req --hash=sha256:$sha") \
      -d "$CACHE/wheels" >&2 || fail "could not download $req from PyPI"
    whl=$(ls "$CACHE"/wheels/"${req%%==*}"-"${req##*==}"-*.whl | head -n 1)
  fi
  echo "$sha  $whl" | sha256sum --check --quiet >&2 || fail "$whl: sha256 mismatch (delete it to fetch again)"
  echo "$whl"
}

# unpack WHEEL DEST PREFIX...: the members under the prefixes, once (DEST/.complete marks it done).
unpack() {
  local whl=$1 dest=$2; shift 2
  [[ -f $dest/.complete ]] && return 0
  rm -rf "$dest"
  "$PYTHON" - "$whl" "$dest" "$@" <<'EOF' || fail "could not unpack $whl"
import sys, zipfile
whl, dest, prefixes = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
with zipfile.ZipFile(whl) as z:
    z.extractall(dest, [m for m in z.namelist() if m.startswith(prefixes)])
EOF
  touch "$dest/.complete"
}

libtorch113() {
  use_cuda118
  command -v cmake >/dev/null || fail "cmake not found (pip install 'cmake>=3.24')"
  command -v ninja >/dev/null || fail "ninja not found (pip install ninja)"
  local torch_whl cudnn_whl lt cudnn out=build/legacy-libtorch113
  torch_whl=$(fetch_wheel torch==1.13.1 fd12043868a34a8da7d490bf6db66991108b00ffbeecb034228bfcbbd4197143)
  cudnn_whl=$(fetch_wheel nvidia_cudnn_cu11==8.5.0.96 402f40adfc6f418f9dae9ab402e773cfed9beae52333f6d86ae3107a1b9527e7)
  lt=$CACHE/libtorch-1.13.1
  cudnn=$CACHE/cudnn-8.5.0.96
  unpack "$torch_whl" "$lt" torch/include/ torch/lib/ torch/share/cmake/
  unpack "$cudnn_whl" "$cudnn" nvidia/cudnn/include/ nvidia/cudnn/lib/libcudnn.so.8
  echo "== libtorch 1.13.1 (CPU): build the library, alexconv_demo and alexconv_script_model"
  SECONDS=0
  # ALEXCONV_CUDA=OFF: the CPU library only, which links libtorch_cpu and not libtorch_cuda (whose
  # cuDNN/cuBLAS are not here); the toolkit and cuDNN only satisfy torch's CMake package.
  # TORCH_CUDA_ARCH_LIST: one that torch 1.13's CMake knows (it turns it into nvcc flags).
  cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DALEXCONV_CUDA=OFF \
    -DALEXCONV_BUILD_SCRIPT_MODEL=ON -DTORCH_CUDA_ARCH_LIST=8.0 \
    -DCMAKE_PREFIX_PATH="$lt/torch/share/cmake" \
    -DCMAKE_CUDA_COMPILER="$NVCC118" -DCMAKE_CUDA_HOST_COMPILER=g++-11 -DCUDA_TOOLKIT_ROOT_DIR=/usr \
    -DCUDNN_INCLUDE_PATH="$cudnn/nvidia/cudnn/include" \
    -DCUDNN_LIBRARY_PATH="$cudnn/nvidia/cudnn/lib/libcudnn.so.8" > "$out.configure.log" 2>&1 \
    || { tail -n 40 "$out.configure.log"; fail "configure against libtorch 1.13.1 failed ($out.configure.log)"; }
  grep -q "alexconv: CPU-only build against a CUDA torch" "$out.configure.log" \
    || fail "the configure did not take the CPU-only link ($out.configure.log)"
  cmake --build "$out" -j 2
  [[ "$(ldd "$out/libalexconv.so")" != *libtorch_cuda* ]] || fail "libalexconv.so links libtorch_cuda"
  local dtype model
  for dtype in float32 bfloat16; do
    model=$out/model_$dtype.pt
    "$out/alexconv_script_model" "$model" --dtype "$dtype"
    # The saved model's code calls the operator (what alexconv_demo then runs).
    "$PYTHON" -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
sys.exit(not any(b'ops.alexconv.conv1(' in z.read(n) for n in z.namelist() if n.endswith('.py')))" "$model" \
      || fail "$model does not call ops.alexconv.conv1"
    "$out/alexconv_demo" "$model" --batch 3 --size 99 --iters 2 | tee "$out/demo_$dtype.log"
    grep -q "OK: both paths match" "$out/demo_$dtype.log" || fail "alexconv_demo ($dtype) did not pass"
  done
  echo "== libtorch 1.13.1 build and run passed in ${SECONDS} s"
}

cuda118() {
  use_cuda118
  local out=build/legacy-cuda118
  mkdir -p "$out"
  echo "== CUDA 11.8 compile check: $("$NVCC118" --version | tail -n 1); sm_80, sm_86, sm_89, sm_90"
  SECONDS=0
  local gencode=() pids=() logs=() a src name entry failed=0
  for a in 80 86 89 90; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
  for src in op/cuda/direct/direct.cu op/cuda/common/tma_map.cu op/cuda/igemm/igemm.cu op/cuda/s2d/s2d.cu op/cuda/s2d_mma_sync/s2d_mma_sync.cu; do
    name=$(basename "$src" .cu)
    # CMakeLists.txt's Release flags, torch's CUDA flags and the target's -lineinfo.
    "$NVCC118" -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr --expt-extended-lambda -lineinfo \
      -ccbin g++-11 "${gencode[@]}" -Xptxas=-v -c "$src" -o "$out/$name.o" > "$out/$name.log" 2>&1 &
    pids+=("$!:$name")
    logs+=("$out/$name.log")
  done
  for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || { echo "FAIL ${entry#*:}:"; tail -n 30 "$out/${entry#*:}.log"; failed=1; }
  done
  [[ $failed == 0 ]] || exit 1
  cat "${logs[@]}" > "$out/ptxas.log"  # not *.log: a rerun would read ptxas.log into itself
  # Registers and spills per target, each spill measured and listed for CUDA 11.8's ptxas.
  "$PYTHON" scripts/dev/check_kernel_resources.py --cuda 11 "$out/ptxas.log"
  echo "== CUDA 11.8 compile check passed in ${SECONDS} s"
}

for step in "${steps[@]}"; do
  case $step in
    cuda118) cuda118 ;;
    libtorch113) libtorch113 ;;
    python113) PYTHON=$PYTHON bash scripts/legacy/legacy_python113.sh ;;
    *) echo "unknown step $step (cuda118, libtorch113, python113)" >&2; exit 2 ;;
  esac
done
