"""Experiments: the TOML file that declares a sweep, and the runner that measures,
analyses and stores each of its runs (resuming an interrupted sweep)."""
