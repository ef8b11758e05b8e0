"""The benchmark's helpers live in bench/ (run as scripts there); make them importable."""

import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH_DIR))
