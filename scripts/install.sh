#!/usr/bin/env bash
# Installs what alexconv needs and builds it into the current Python environment.
# Reuses an installed torch; otherwise installs $ALEXCONV_TORCH (default torch==2.13.0,
# the CPU build on our CI machines). Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "== installing ${ALEXCONV_TORCH:-torch==2.13.0}"
  "$PYTHON" -m pip install --quiet "${ALEXCONV_TORCH:-torch==2.13.0}"
fi
echo "== build tools and test dependencies"
# numpy: torch imports it when present and warns "Failed to initialize NumPy" on every run when not.
"$PYTHON" -m pip install --quiet numpy "scikit-build-core>=0.10" "cmake>=3.24" ninja "pytest>=7" "pytest-timeout>=2" "hypothesis>=6"
echo "== building alexconv (pip install --no-build-isolation -e .)"
"$PYTHON" -m pip install --quiet --no-build-isolation -e ".[test]"
"$PYTHON" -c "import alexconv, torch; print('alexconv', alexconv.__version__, 'at', alexconv.library_path(), '| torch', torch.__version__, '| cuda', torch.cuda.is_available())"
