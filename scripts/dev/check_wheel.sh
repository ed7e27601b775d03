#!/usr/bin/env bash
# Usage: bash scripts/dev/check_wheel.sh   (after scripts/install.sh)
# The wheel route (README "Building"): builds the wheel as the README says, installs it into a
# fresh virtual environment and runs the op, alexconv-export's module and the C++ demo from it.
# Seconds after scripts/install.sh: the wheel reuses the editable build's CMake folder
# (build/<wheel tag>). The fresh environment gets torch and numpy from this one (a .pth file
# listing their folders, after its own site-packages), so nothing is downloaded; it must import
# the wheel's alexconv, not this environment's.
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dir=build/wheel-check
rm -rf "$dir"
mkdir -p "$dir"
"$PYTHON" -m pip wheel --no-build-isolation --no-deps -w "$dir/dist" .
wheel=$(ls "$dir"/dist/alexconv-*.whl)
"$PYTHON" -m venv --without-pip "$dir/venv"
venv_python=$PWD/$dir/venv/bin/python
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$PYTHON" -c 'import os, numpy, torch
for m in (torch, numpy): print(os.path.dirname(os.path.dirname(m.__file__)))' | sort -u > "$site/alexconv-wheel-check-deps.pth"
# This environment's pip installs into the fresh one (which has none): --prefix puts the files
# where its interpreter looks (the same Python version); --ignore-installed leaves this
# environment's own alexconv alone (without it pip uninstalls that one first).
"$PYTHON" -m pip install --no-deps --no-index --ignore-installed --prefix "$dir/venv" "$wheel"
cd "$dir"  # away from the source tree: nothing of it may be imported
"$venv_python" - <<'PY'
import pathlib, subprocess, sys
import torch, torch.nn.functional as F
import alexconv
from alexconv import export
where = pathlib.Path(alexconv.__file__).resolve()
assert str(where).startswith(str(pathlib.Path(sys.prefix).resolve())), f"imported {where}, not the wheel's"
x, w, b = torch.rand(2, 3, 67, 67), torch.rand(64, 3, 11, 11), torch.rand(64)
torch.testing.assert_close(alexconv.conv1(x, w, b, relu=True), F.relu(F.conv2d(x, w, b, stride=4, padding=2)),
                           atol=1e-4, rtol=1e-4)
export.main(["model.pt"])
demo = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_demo"
out = subprocess.run([str(demo), "model.pt", "--batch", "2", "--size", "67", "--iters", "1"],
                     capture_output=True, text=True, check=True).stdout
assert "OK: both paths match" in out, out
print(f"alexconv {alexconv.__version__} from the wheel at {where.parent}: the op, export and the C++ demo run")
PY
cd - > /dev/null
# And this environment still has its own alexconv.
"$PYTHON" -c "import alexconv" || { echo "check_wheel: this environment lost its alexconv" >&2; exit 1; }
