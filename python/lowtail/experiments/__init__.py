"""Experiment files shipped with lowtail (`lowtail run` without a file runs default.toml)."""
