"""The version of this lowtail, one owner for every page, document and store row that names it.

The native extension carries it (Cargo's version, built in), so a page or a stored row can
say which lowtail wrote it without importing the native analysis itself."""

from __future__ import annotations

from lowtail._native import __version__

__all__ = ["__version__"]
