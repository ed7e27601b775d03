#!/usr/bin/env bash
# Usage: [ALEXCONV_INSTALL_LEGACY=1] bash scripts/legacy/legacy_python113.sh [pytest arguments]   (as root)
# The python113 step of scripts/legacy/check_legacy.sh: the Python package built and its test suite
# run on torch 1.13.1 (PyPI's cp39 wheel) with Python 3.9, in a Debian bullseye chroot (this
# machine's Python is too new for torch 1.13, whose wheels stop at 3.10). Needs root.
#
# The chroot ($ALEXCONV_LEGACY_ROOT, default /opt/alexconv-legacy/bullseye) is created with
# debootstrap when ALEXCONV_INSTALL_LEGACY=1 (1.5 minutes here), with bullseye's
# nvidia-cuda-toolkit (CUDA 11.2, 2 minutes): torch 1.13's CMake package wants a CUDA toolkit
# and cuDNN even for a CPU-only build, and the venv's nvidia-cudnn-cu11 (a torch dependency)
# gives the cuDNN. The repository is bind-mounted at /alexconv; nothing is installed on the host.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$PWD
ROOT=${ALEXCONV_LEGACY_ROOT:-/opt/alexconv-legacy/bullseye}
MIRROR=http://deb.debian.org/debian
fail() { echo "legacy_python113: $*" >&2; exit 1; }

[[ $EUID == 0 ]] || fail "needs root (debootstrap, chroot, mount)"
install=${ALEXCONV_INSTALL_LEGACY:-}
if [[ ! -x $ROOT/usr/bin/python3 ]]; then
  [[ $install == 1 ]] || fail "no Debian bullseye root at $ROOT: ALEXCONV_INSTALL_LEGACY=1 creates it"
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  debootstrap --include=python3,python3-venv,python3-pip,python3-dev,g++,make,ca-certificates \
    bullseye "$ROOT" "$MIRROR"
fi
if [[ ! -x $ROOT/usr/bin/nvcc ]]; then
  [[ $install == 1 ]] || fail "no nvcc in $ROOT (torch 1.13's CMake needs one): ALEXCONV_INSTALL_LEGACY=1 installs it"
  echo "deb $MIRROR bullseye contrib non-free" > "$ROOT/etc/apt/sources.list.d/alexconv-contrib-nonfree.list"
  chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    /bin/bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit'
fi

# Name resolution and this machine's certificate bundle (PyPI may be reached through a proxy
# that signs with its own CA), under a name of their own so the chroot's stay intact.
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$ROOT/etc/alexconv-host-ca.crt"
printf '[global]\ncert = /etc/alexconv-host-ca.crt\n' > "$ROOT/etc/pip.conf"

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" || true; done
}
trap cleanup EXIT
bind() {  # bind SOURCE TARGET-IN-ROOT, unless SOURCE is mounted there already
  mkdir -p "$ROOT$2"
  if mountpoint -q "$ROOT$2"; then
    # A run killed before its cleanup leaves its mounts: the checkout there may be another one's
    # (a worktree's suite then ran the main checkout's tree).
    [[ $(findmnt -n -o FSROOT "$ROOT$2" | tail -n 1) == "$(realpath "$1")" ]] && return 0
    umount -R "$ROOT$2"
  fi
  mount --rbind "$1" "$ROOT$2"
  mount --make-rslave "$ROOT$2"
  mounted+=("$ROOT$2")
}
bind /proc /proc
bind /dev /dev
bind "$REPO" /alexconv

echo "== torch 1.13.1 in $ROOT (Python $("$ROOT/usr/bin/python3" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo 3.9))"
SECONDS=0
# ALEXCONV_SLOW_TESTS=1: the tests marked slow run here as in CI (tests/conftest.py), CI being unset.
chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ALEXCONV_SLOW_TESTS=1 \
  /bin/bash -s -- "$@" <<'EOF'
set -euo pipefail
V=/opt/venv113
[[ -x $V/bin/python ]] || python3 -m venv "$V"
export PATH=$V/bin:$PATH
# bullseye's pip 20.3 predates editable PEP 660 builds and some wheels' metadata.
pip install --quiet "pip>=23,<25"
pip install --quiet torch==1.13.1 "numpy<2" "scikit-build-core>=0.10" "cmake>=3.24" ninja \
  "pytest>=7" "pytest-timeout>=2" "hypothesis>=6"
cudnn=$(python -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))')
# The wheel has libcudnn.so.8 only; torch's FindCUDNN looks for libcudnn.so.
ln -sf libcudnn.so.8 "$cudnn/lib/libcudnn.so"
export CUDNN_ROOT_DIR=$cudnn
# CPU-only (no GPU here): the library links libtorch_cpu. TORCH_CUDA_ARCH_LIST: one that torch
# 1.13's CMake and CUDA 11.2 know; no CUDA code is compiled.
export ALEXCONV_CUDA=OFF TORCH_CUDA_ARCH_LIST=8.0
cd /alexconv
pip install --quiet --no-build-isolation ".[test]"
# What this torch lacks (alexconv._compat), which the suite skips by name (pytest -q hides its header).
python -c "import alexconv, torch, sys; from alexconv import _compat; print('alexconv', alexconv.__version__, \
'| torch', torch.__version__, '| Python', sys.version.split()[0], '| lacks:', ', '.join(_compat.missing()) or 'nothing')"
python -m pytest -q -ra "$@"
EOF
echo "== torch 1.13.1 suite passed in ${SECONDS} s"
