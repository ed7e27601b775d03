#!/usr/bin/env bash
# Usage: bash scripts/demo.sh [alexconv_demo arguments, e.g. --batch 32]
# README's demo command: install, build, export the scripted model, run the C++ demo on it, on
# CUDA if there is a GPU, else on CPU. Extra arguments go to alexconv_demo.
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh
model=build/alexconv_modelnew.pt
"$PYTHON" -m alexconv.export "$model"
device=$("$PYTHON" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
demo=$("$PYTHON" -c "import alexconv, pathlib; print(pathlib.Path(alexconv.library_path()).parent / 'bin' / 'alexconv_demo')")
echo "== demo     alexconv_demo $model --device $device $* (${SECONDS} s so far)"
exec "$demo" "$model" --device "$device" "$@"
