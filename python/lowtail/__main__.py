"""The `lowtail` command (`python -m lowtail` and the installed script).

The stop rule (`lowtail.core.signals`) is in place before the command's modules load, which
takes a good part of a second: a Ctrl-C, SIGTERM or SIGHUP then is an interruption (one
line, exit 130) too, not a traceback or a silent death."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from lowtail.core import signals


@contextmanager
def _start_up_kept() -> Iterator[None]:
    """What start-up makes (modules, classes, functions: kept until the process exits) is
    never garbage: the cyclic collector, which ran some 90 times over it while it was made,
    pauses meanwhile, and it is then set apart from what the collector looks at (`gc.freeze`).
    In `lowtail analyze`: 46 collections instead of 90, 11 ms of CPU in them instead of 26."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def run() -> None:
    """Load the command line and run it, stop signals handled from the start."""
    with signals.stop_on_signals(until_exit=True):
        try:
            with _start_up_kept():
                from lowtail.cli import load_commands, main

                load_commands()  # the command's own module too (main finds it loaded)
        except KeyboardInterrupt:
            print("lowtail: interrupted", file=sys.stderr)
            sys.exit(130)
        try:
            main()
        except KeyboardInterrupt:
            # A stop signal raised while the command was already ending (its SystemExit
            # replaced in a clean-up's `finally`): the command was interrupted and has
            # said so, or says it now; the exit code stays 130, not a death by SIGINT.
            from lowtail.cli import _output

            if not _output.ended():
                print("lowtail: interrupted", file=sys.stderr)
            sys.exit(130)


if __name__ == "__main__":
    run()
