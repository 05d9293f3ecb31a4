"""Shared setup for the Python tests.

The suite runs everywhere: without torch or without a CUDA device the torch tests report
themselves skipped (pytest.importorskip / skip markers), so `pytest tests/python` exits 0 on the
CPU-only CI machine. The in-tree package (python/flashattn) is tested unless
FLASHATTN_TEST_INSTALLED=1 asks for the installed one.
"""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

if os.environ.get("FLASHATTN_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))
