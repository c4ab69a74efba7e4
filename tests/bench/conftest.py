"""The benchmarks live in the checkout's bench/, not in the installed package: import them from
the project root (``python -m bench.gpu_suite`` does the same from there)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
