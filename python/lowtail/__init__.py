"""lowtail: prove that a network function keeps its tail latency inside a budget."""


def __getattr__(name: str) -> str:
    # The version comes from the native module (built from the same Cargo version);
    # importlib.metadata would cost ~80 ms on every start of the command.
    if name == "__version__":
        from lowtail._native import __version__

        return __version__
    raise AttributeError(f"module 'lowtail' has no attribute {name!r}")
