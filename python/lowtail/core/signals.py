"""How lowtail stops on SIGINT, SIGTERM and SIGHUP: one rule for every command.

The first of these signals stops the command: it raises KeyboardInterrupt in the main
thread (SIGTERM and SIGHUP exactly like Ctrl-C), and the command ends with what it
finished kept (exit 130). From then on the command is *stopping*: further signals are
noted and not raised, so that teardown — a testbed's programs, namespaces and cgroups, a
database transaction, the rollback of a host setting — runs to its end whatever arrives
while it runs (an impatient second Ctrl-C included). Only SIGKILL cuts it short; what that
leaves, the programs end themselves (they die with their parent) and the next
`lowtail run` (or `lowtail testbed clean`) removes.

`held()` defers even the first signal around work that must not be cut in two (a write
and the record of it, a commit): a signal that arrives inside is raised when it ends.

A stop raised where Python cannot raise — inside a weakref callback or a finalizer, such as
the import system's module-lock callback while the command's modules load — would be
"ignored" (printed as an unraisable exception, the command going on as if never stopped):
the unraisable hook takes it back and a thread delivers the signal to the main thread again
until a stop is raised at a place that can raise it (a real signal, so that a main thread
blocked in a system call wakes for it; a delivery the handler takes while the hook itself
still runs is put off to the thread's next try, never raised inside the hook, where it would
be lost too).

Why handlers and not a blocked signal mask: a process-directed signal goes to any thread
that does not block it (DuckDB's workers, the analysis thread), and CPython then raises
it in the main thread at its next instruction whatever that thread's mask says.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _State:
    installed = False  # inside stop_on_signals()
    held = 0  # nesting depth of held()
    pending: int | None = None  # a signal that arrived inside held(), raised when it ends
    stopping: int | None = None  # the signal that stopped the command
    told = False  # the "still stopping" note was printed
    redelivery = 0  # which stop lost in a finalizer is being delivered again (its thread's number)
    # Times the handler ran: the redelivering thread watches it move. A counter, not a
    # threading.Event: a handler takes no lock, since a second signal can run the handler
    # again in the middle of the first (between any two of its instructions), and an Event's
    # lock taken twice by the main thread never came free (a double Ctrl-C hung `lowtail run`).
    handled = 0


_state = _State()


class Stop(KeyboardInterrupt):
    """A stop signal raised in the main thread: a KeyboardInterrupt, told apart from one the
    interpreter raised, so that one lost in a finalizer can be delivered again."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _tell(message: str) -> None:
    """One line on stderr from a signal handler: never raises (after SIGHUP the terminal
    may be gone)."""
    try:
        os.write(2, f"lowtail: {message}\n".encode())
    except OSError:
        pass


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _state.handled += 1
    if _inside_the_unraisable_hook(frame):  # raised here it would be lost: the thread tries again
        return
    if _state.stopping is not None:
        if not _state.told:
            _state.told = True
            _tell(
                f"{signal.Signals(signum).name} while stopping: finishing the clean-up first "
                "(it takes seconds; what a kill -9 leaves, the next `lowtail run` removes)"
            )
        return
    if _state.held:
        _state.pending = _state.pending or signum
        return
    _state.stopping = signum
    raise Stop


def _inside_the_unraisable_hook(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is _delivered_again.__code__:
            return True
        frame = frame.f_back
    return False


def _delivered_again(unraisable: sys.UnraisableHookArgs) -> None:
    """The unraisable hook while stop signals are handled: a `Stop` raised where it could not
    propagate (a weakref callback, a finalizer) is not a stop yet — its signal is delivered
    again, from another thread, until the handler raises it at a point that can raise.
    Anything else goes to the hook that was there before."""
    if isinstance(unraisable.exc_value, Stop) and _state.stopping is not None:
        signum, _state.stopping = _state.stopping, None
        _state.redelivery += 1
        main = threading.main_thread().ident
        assert main is not None  # the main thread runs: it is the one in this hook
        again = threading.Thread(target=_redeliver, args=(signum, _state.redelivery, main), daemon=True)
        again.start()
        return
    _previous_hook(unraisable)


def _redeliver(signum: int, redelivery: int, main: int) -> None:
    """Signal the main thread until its handler has raised the stop (`stopping` set), the
    handling ended, or a later lost stop took over. A real signal, not interrupt_main: that
    one does not wake a main thread blocked in a system call. Deliveries not yet handled
    merge into one (the interpreter keeps one flag per signal), so a slow main thread gets
    no second stop from here."""
    while _state.installed and _state.redelivery == redelivery and _state.stopping is None:
        before, deadline = _state.handled, time.monotonic() + 1.0
        signal.pthread_kill(main, signum)
        while _state.handled == before and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(0.01)  # a try put off inside the hook: the next, once the hook has returned


_previous_hook = sys.unraisablehook


def stop_signal() -> int | None:
    """The signal that stopped the command (None while it was not stopped)."""
    return _state.stopping


@contextmanager
def stop_on_signals(until_exit: bool = False) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop what runs inside (as KeyboardInterrupt), once; a
    no-op outside the main thread (only it can take signals) and when already installed.

    `until_exit` (the process's entry point): after the block the signals stay ignored
    while the process exits — the command is over, stopped or not, and has said so. The
    interpreter's shutdown puts a Python handler back to the signal's default action, so
    a Ctrl-C then (a second one, or one just after "stored as analysis 4") would kill the
    process (-SIGINT) instead of its exit code."""
    if not _in_main_thread() or _state.installed:
        yield
        return
    global _previous_hook
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    _previous_hook, sys.unraisablehook = sys.unraisablehook, _delivered_again
    for s in STOP_SIGNALS:
        if previous[s] != signal.SIG_IGN:  # an ignored signal stays ignored: nohup's promise
            signal.signal(s, _on_signal)
    _state.installed = True
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_IGN if until_exit else handler)
        sys.unraisablehook = _previous_hook
        _state.installed = False
        _state.held = 0
        _state.pending = _state.stopping = None
        _state.told = False


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: a stop signal that arrives inside is raised when it ends
    (over any exception of the block: the user asked to stop)."""
    if not _in_main_thread():
        yield
        return
    with stop_on_signals():
        _state.held += 1
        try:
            yield
        finally:
            _state.held -= 1
            if not _state.held and _state.pending is not None and _state.stopping is None:
                _state.stopping, _state.pending = _state.pending, None
                raise Stop
