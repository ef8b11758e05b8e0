"""Where lowtail's native helper programs are (lowtail-gen, lowtail-fwd, lowtail-noise, ...)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from lowtail.core.errors import UserError


def find_binary(name: str) -> Path:
    """The installed program `name`: beside the running Python (the venv's bin), on
    PATH, or in a source tree's target/release."""
    candidates = [Path(sys.prefix) / "bin" / name]
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates.append(Path(__file__).resolve().parents[2] / "target" / "release" / name)
    for c in candidates:
        if c.is_file():
            return c
    raise UserError(f"the native program {name} is not installed (run `make build`)")
