"""The host's side of a testbed: running iproute2 commands, checking privileges, and
telling whether a process is still the one we started.

iproute2 (`ip`, `tc`) rather than a netlink library: `ip netns exec` is what puts a
program inside a namespace anyway, `tc`'s u32/mirred syntax is the one users know and
can paste into a shell to reproduce a DuT by hand, and its error messages are readable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lowtail.core.errors import Failure, UserError

_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])

# CAP_NET_ADMIN (links, qdiscs), CAP_NET_RAW (packet sockets), CAP_SYS_ADMIN (namespaces, cgroups).
_CAPABILITIES = {12: "CAP_NET_ADMIN", 13: "CAP_NET_RAW", 21: "CAP_SYS_ADMIN"}


def tool(name: str, package: str = "iproute2") -> str:
    """Absolute path of a system program, or a UserError naming the Debian package."""
    found = shutil.which(name, path=_SBIN_PATH)
    if not found:
        raise UserError(
            f"the `{name}` command is missing: install the Debian package {package} (apt-get install {package})"
        )
    return found


def home_path(name: str) -> Path:
    """A file name as the user wrote it, with `~` and `~user` expanded; ValueError, saying
    which, when it starts with a home this host does not know."""
    try:
        return Path(name).expanduser()
    except RuntimeError:  # Path.expanduser: no such user, or no HOME
        raise ValueError(f"{name!r} starts with a home directory this host does not know") from None


def names_file(name: str) -> bool:
    """Whether a file name as the user wrote it names a regular file here."""
    try:
        return home_path(name).is_file()
    except ValueError:
        return False


def missing_capabilities() -> list[str]:
    """The capabilities a testbed needs that this process does not have."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            effective = int(line.split()[1], 16)
            return [name for bit, name in _CAPABILITIES.items() if not effective >> bit & 1]
    return list(_CAPABILITIES.values())


def require_privileges(action: str) -> None:
    """A clear error naming `action` when this process lacks what testbeds need."""
    missing = missing_capabilities()
    if missing:
        raise UserError(
            f"{action} needs root: network namespaces, veth links, packet sockets and cgroups "
            f"need {', '.join(missing)}; run it as root (e.g. with sudo)"
        )


def sh(*argv: str, what: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a short system command; a failure becomes one readable line."""
    try:
        # In a session of its own: a terminal's Ctrl-C goes to the whole foreground process
        # group, and a second one during a teardown killed `ip netns delete` half-way and left
        # the namespace. lowtail takes the signal; the short command it is running finishes.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise Failure(f"{what}: `{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    if check and done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise Failure(f"{what}: {detail[-1] if detail else f'exit code {done.returncode}'}")
    return done


def local_argv(argv: list[str]) -> list[str]:
    """A set-up command as this host runs it: iproute2's programs by their full path (they
    live in /sbin, which an ordinary PATH may lack), anything else as given."""
    return [tool(argv[0]), *argv[1:]] if argv and argv[0] in ("ip", "tc") else list(argv)


def ip(*args: str, what: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `ip` with these arguments; `what` says what for in its error."""
    return sh(tool("ip"), *args, what=what, check=check)


def tc(*args: str, what: str) -> subprocess.CompletedProcess[str]:
    """Run `tc` with these arguments; `what` says what for in its error."""
    return sh(tool("tc"), *args, what=what)


# Process identity (pid + start time) is shared with the store's import clean-up: lowtail/core/processes.py.
