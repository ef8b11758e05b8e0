"""lowtail: prove that a network function keeps its tail latency inside a budget."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("lowtail")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"
