"""The conversation tests replay the recordings of the real instrumentation libraries: `recorded.py` of
tests/extract, the one reader of their manifests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "extract"))
