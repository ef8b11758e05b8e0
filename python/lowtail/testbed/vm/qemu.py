"""QEMU for a VM DuT: which acceleration works here, the command line, QMP (to find and pin
the vCPU threads) and the guest's control channel (a virtio-serial port: readiness, the
guest's /proc/interrupts, the forwarder's statistics, the stop command).

Acceleration is probed, not assumed: a host may offer /dev/kvm on which a stock kernel
does not boot (a nested PVM host fails `-cpu host` with "failed to set MSR 0x10a" and hangs
`-cpu qemu64` in early boot). The probe boots the guest image under KVM with a deadline and
falls back to TCG, QEMU's emulator; the answer is kept per host boot.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from lowtail.core.errors import Failure, UserError
from lowtail.host.interrupts import InterruptSample, diff, parse_interrupts
from lowtail.testbed.process import die_with
from lowtail.testbed.system import tool

QEMU = "qemu-system-x86_64"
QEMU_PACKAGE = "qemu-system-x86"
ACCELERATIONS = ("kvm", "tcg")
# A guest under KVM reaches its init in 1-3 s; one that has not after this never will.
KVM_PROBE_TIMEOUT_S = 20.0
CONTROL_PORT = "lowtail.0"
BOOTED_MARK = "@booted"


def qemu_binary() -> str:
    """The QEMU system emulator's path (a UserError naming its Debian package when missing)."""
    return tool(QEMU, QEMU_PACKAGE)


def qemu_version() -> str:
    """QEMU's version line (part of the key the acceleration probe's answer is kept under)."""
    done = subprocess.run([qemu_binary(), "--version"], capture_output=True, text=True)
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


# -- acceleration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Acceleration:
    """How guests run on this host: kvm or tcg, and why."""

    name: str
    reason: str

    def accel_args(self, vcpus: int) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", "host"]
        # One host thread per vCPU (multi-threaded TCG), each pinnable like a KVM vCPU thread.
        return ["-accel", "tcg,thread=multi" if vcpus > 1 else "tcg", "-cpu", "max"]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def probe_acceleration(kernel: Path, initrd: Path, cache: Path, log: Callable[[str], None]) -> Acceleration:
    """KVM if a guest boots under it within KVM_PROBE_TIMEOUT_S, else TCG. The answer is
    kept in the cache for this host boot and this QEMU."""
    record = cache / "acceleration.json"
    key = {"boot_id": _boot_id(), "qemu": qemu_version()}
    try:
        doc = json.loads(record.read_text())
        if doc.get("key") == key:
            return Acceleration(doc["name"], doc["reason"])
    except (OSError, ValueError, KeyError):
        pass
    result = _probe_kvm(kernel, initrd, log)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"key": key, "name": result.name, "reason": result.reason}))
    return result


def _probe_kvm(kernel: Path, initrd: Path, log: Callable[[str], None]) -> Acceleration:
    if not os.path.exists("/dev/kvm"):
        return Acceleration("tcg", "no /dev/kvm on this host")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Acceleration("tcg", "/dev/kvm is not accessible to this user")
    log(f"probing KVM: booting the guest under it (at most {KVM_PROBE_TIMEOUT_S:g} s)")
    argv = [
        qemu_binary(),
        *Acceleration("kvm", "").accel_args(1),
        *machine_args(kernel, initrd, 1, 256),
        "-append",
        f"{GUEST_BASE_CMDLINE} lowtail.mode=probe",
        "-serial",
        "stdio",
    ]
    try:
        parent = os.getpid()  # the probe's guest goes with lowtail, however lowtail ends
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=KVM_PROBE_TIMEOUT_S, preexec_fn=lambda: die_with(parent)
        )
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        last = [line for line in text.splitlines() if line.strip()][-1:] or ["nothing"]
        return Acceleration(
            "tcg", f"a guest under KVM did not boot within {KVM_PROBE_TIMEOUT_S:g} s (its last output: {last[0]})"
        )
    if BOOTED_MARK in done.stdout:
        return Acceleration("kvm", "a guest booted under KVM")
    detail = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()][-1:] or ["no output"]
    return Acceleration("tcg", f"QEMU could not run a guest under KVM: {detail[0].strip()}")


# -- the command line --------------------------------------------------------------------------------

# The guest's base parameters (a run's own come after): the console for the kernel's log,
# quiet (every console byte is an emulated port write), no reboot on panic (QEMU exits).
GUEST_BASE_CMDLINE = "console=ttyS0 quiet panic=-1 ipv6.disable=1"


def machine_args(kernel: Path, initrd: Path, vcpus: int, memory_mib: int) -> list[str]:
    """A guest's machine: a PC with `vcpus` and `memory_mib`, no display or default devices,
    booting `kernel` with `initrd` directly (no firmware disk)."""
    return [
        "-machine",
        "pc",
        "-smp",
        str(vcpus),
        "-m",
        str(memory_mib),
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-kernel",
        str(kernel),
        "-initrd",
        str(initrd),
    ]


@dataclass(frozen=True)
class Nic:
    tap: str  # the tap device QEMU creates in the DuT namespace
    mac: str  # the guest side's address (the guest finds its interface by it)


def qemu_argv(
    name: str,
    accel: Acceleration,
    kernel: Path,
    initrd: Path,
    vcpus: int,
    memory_mib: int,
    cmdline: str,
    nics: list[Nic],
    console_log: Path,
    qmp_socket: Path,
    control_socket: Path,
) -> list[str]:
    """The QEMU command line of a DuT guest; it starts paused (-S) so that its vCPU threads
    can be pinned before the guest runs."""
    argv = [
        qemu_binary(),
        "-name",
        f"{name},debug-threads=on",
        *accel.accel_args(vcpus),
        *machine_args(kernel, initrd, vcpus, memory_mib),
        "-append",
        cmdline,
        "-serial",
        f"file:{console_log}",
        "-qmp",
        f"unix:{qmp_socket},server=on,wait=off",
        "-chardev",
        f"socket,id=ctl,path={control_socket},server=on,wait=off",
        "-device",
        "virtio-serial-pci",
        "-device",
        f"virtserialport,chardev=ctl,name={CONTROL_PORT}",
        "-S",
    ]
    for i, nic in enumerate(nics):
        argv += [
            "-netdev",
            f"tap,id=n{i},ifname={nic.tap},script=no,downscript=no",
            "-device",
            f"virtio-net-pci,netdev=n{i},mac={nic.mac}",
        ]
    return argv


# -- QMP ----------------------------------------------------------------------------------------------
# QEMU's Machine Protocol: one JSON object a line. lowtail reads the replies to its own
# commands (`return`, or `error` with its description) and skips the rest (the greeting,
# events), whatever else they carry.

Reply = TypeVar("Reply")


class QmpError(msgspec.Struct):
    """A command's error: QEMU's description of it (its `class` is not read)."""

    desc: str | None = None


class QmpMessage(msgspec.Struct):
    """A line of QMP: a command's reply has `return` (kept as its JSON, read by the command's
    own type) or `error`; the greeting and events have neither."""

    returned: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="return")  # empty: absent
    error: QmpError | None = None


class CpuInfo(msgspec.Struct):
    """A vCPU as `query-cpus-fast` lists it: its index and its host thread."""

    cpu_index: int = msgspec.field(name="cpu-index")
    thread_id: int = msgspec.field(name="thread-id")


class Qmp:
    """A QMP connection: capabilities negotiated, commands executed one at a time."""

    def __init__(self, path: Path, timeout_s: float = 10.0, alive: Callable[[], bool] = lambda: True):
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.sock.close()
                if time.monotonic() > deadline or not alive():
                    raise Failure(f"QEMU's QMP socket {path} did not open") from None
                time.sleep(0.05)
        self.sock.settimeout(timeout_s)
        self.reader = self.sock.makefile("r")
        self._next()  # the greeting
        self.execute("qmp_capabilities")

    def _next(self) -> QmpMessage:
        line = self.reader.readline()
        if not line:
            raise Failure("QEMU closed its QMP connection")
        return _qmp_decode(line, QmpMessage)

    def execute(self, command: str, **arguments: object) -> msgspec.Raw:
        """`command` done by QEMU: what it returns, as JSON (a Failure when it refuses it)."""
        doc: dict[str, object] = {"execute": command}
        if arguments:
            doc["arguments"] = arguments
        self.sock.sendall(json.dumps(doc).encode() + b"\n")
        while True:
            reply = self._next()
            if reply.returned:
                return reply.returned
            if reply.error is not None:
                raise Failure(f"QEMU refused {command}: {reply.error.desc}")

    def query(self, command: str, returns: type[Reply], **arguments: object) -> Reply:
        """What QEMU returns to `command`, read as a `returns`."""
        return _qmp_decode(self.execute(command, **arguments), returns)

    def close(self) -> None:
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass


def _qmp_decode(text: str | msgspec.Raw, shape: type[Reply]) -> Reply:
    """A QMP line (or a reply's `return`) as `shape`; a Failure when it is not one."""
    try:
        return msgspec.json.decode(text, type=shape)
    except msgspec.DecodeError as e:
        shown = text if isinstance(text, str) else bytes(text).decode(errors="replace")
        raise Failure(f"QEMU said on QMP what lowtail cannot read ({e}): {shown.strip()[:200]}") from None


def vcpu_threads(qmp: Qmp) -> dict[int, int]:
    """vCPU index → host thread id."""
    return {c.cpu_index: c.thread_id for c in qmp.query("query-cpus-fast", list[CpuInfo])}


def process_threads(pid: int) -> list[int]:
    """The thread ids of a process (none when it has ended)."""
    try:
        return sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return []


# -- the guest's control channel ---------------------------------------------------------------------


@dataclass
class GuestChannel:
    """The host's end of the guest's virtio-serial port. A reader thread stamps the guest's
    interrupt tables with the host's clock as they arrive (the guest's clock is its own) and
    turns them into the same samples the host's InterruptSampler records."""

    path: Path
    ready: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    # What the guest's forwarder counted (`@stats`, a JSON object): the DuT's own statistics,
    # whose keys are its forwarder's (duts/vm.py reads a guest Suricata's).
    stats: dict[str, object] | None = None
    samples: list[InterruptSample] = field(default_factory=list)
    tables: int = 0

    def connect(self, timeout_s: float, alive: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(str(self.path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.sock.close()
                if time.monotonic() > deadline or not alive():
                    raise Failure(f"the guest's control socket {self.path} did not open") from None
                time.sleep(0.05)
        self._thread = threading.Thread(target=self._read, name="lowtail-guest-channel", daemon=True)
        self._thread.start()

    def send(self, line: str) -> None:
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError:
            pass

    def _read(self) -> None:
        try:
            with self.sock.makefile("r", errors="replace") as lines:
                self._handle(lines)
        except OSError:
            pass  # QEMU went away: whatever was said before is kept

    def _handle(self, lines: Iterable[str]) -> None:
        table: list[str] | None = None
        last = None
        last_t = 0  # when `last` was read (read only once there is a `last`)
        for raw in lines:
            line = raw.rstrip("\n")
            if table is not None:
                if not line.startswith("@"):
                    table.append(line)
                    continue
                if line != "@end":
                    # The sampler was stopped inside a table (its `cat` cut short): the table
                    # is dropped and the line read as what it is — the guest's @stats and
                    # @stopped follow, and read as table rows they were lost.
                    table = [] if line == "@irq" else None
                    self._control(line)
                    continue
                t = time.time_ns()
                try:
                    parsed = parse_interrupts("\n".join(table))
                except UserError:
                    parsed = None
                table = None
                if parsed is None:
                    continue
                self.tables += 1
                if last is not None:
                    for (cpu, kind), d in diff(last, parsed).items():
                        self.samples.append(InterruptSample(t, cpu, kind, d, t - last_t))
                last, last_t = parsed, t
            elif line == "@irq":
                table = []
            else:
                self._control(line)

    def _control(self, line: str) -> None:
        """A line of the guest's other than a table's: ready, statistics, stopped, an error."""
        if line == "@ready":
            self.ready.set()
        elif line.startswith("@stats "):
            try:
                self.stats = msgspec.json.decode(line[len("@stats ") :], type=dict[str, object])
            except msgspec.DecodeError:  # not JSON, or not an object
                self.stats = {"unreadable": line[len("@stats ") : 200]}
        elif line == "@stopped":
            self.stopped.set()
        elif line.startswith("@error "):
            self.error = line[len("@error ") :]
            self.ready.set()

    def samples_between(self, start_ns: int, end_ns: int) -> list[InterruptSample]:
        """The samples whose interval overlaps [start_ns, end_ns] (the traffic's window). Not
        only those that end inside it: a guest starved under emulation may send no table while
        the traffic flows, and the first one after it is then all that covers the window."""
        return [s for s in list(self.samples) if s.t_ns >= start_ns and s.t_ns - s.interval_ns <= end_ns]

    def close(self) -> None:
        try:
            self.sock.close()
        except (OSError, AttributeError):
            pass
