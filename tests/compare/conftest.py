"""The latency models with known truths live in bench/ (bench/stated_confidence.py measures with
them at scale): make them importable here."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
