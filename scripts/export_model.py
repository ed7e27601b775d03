# Usage: python3 scripts/export_model.py MODEL.pt|MODEL.pt2 [alexconv-export options]
"""Kept for old command lines: the export lives in the package now.

    alexconv-export model.pt          (installed with the package; or python -m alexconv.export)

This file runs the same code (alexconv.export.main) with the same arguments.
"""

from alexconv.export import main

if __name__ == "__main__":
    main()
