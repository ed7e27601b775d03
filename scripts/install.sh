#!/usr/bin/env bash
# Usage: [ALEXCONV_TORCH=torch==X] bash scripts/install.sh
# Installs what alexconv needs and builds it into the current Python environment, one line per
# stage with its time (their output: build/logs/). Reuses an installed torch; otherwise installs
# $ALEXCONV_TORCH (default torch==2.13.0, the CPU build on our CI machines). Run by
# scripts/test.sh and scripts/demo.sh.
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/dev/stage.sh

if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  stage torch "installing ${ALEXCONV_TORCH:-torch==2.13.0} (pip; 20 s from a local wheel, longer when it downloads)" \
    "$PYTHON" -m pip install "${ALEXCONV_TORCH:-torch==2.13.0}"
fi
# numpy: torch imports it when present and warns "Failed to initialize NumPy" on every run when not.
stage tools "build tools and test dependencies (pip)" \
  "$PYTHON" -m pip install numpy "scikit-build-core>=0.10" "cmake>=3.24" ninja "pytest>=7" "pytest-timeout>=2" "hypothesis>=6"
stage build "building alexconv: pip install --no-build-isolation -e '.[test]' (about a minute on 2 cores, seconds when built)" \
  "$PYTHON" -m pip install --no-build-isolation -e ".[test]"
"$PYTHON" -c "import alexconv, torch; print('== alexconv', alexconv.__version__, 'at', alexconv.library_path(), '| torch', torch.__version__, '| cuda', torch.cuda.is_available())"
