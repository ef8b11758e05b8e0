"""Is the DuT forwarding yet? Probe frames sent on the generator's port must come back on
the capture port. DuTs take from milliseconds (tc) to seconds (DPDK) to get ready; the
probe replaces guessing with a sleep, and tells a DuT that forwards nothing from a slow one.

Probe frames carry the IEEE local experimental EtherType 0x88B5, so `lowtail analyze`
counts them as foreign frames should any reach a capture."""

from __future__ import annotations

import ctypes
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import TypedDict

ETH_P_PROBE = 0x88B5
_CLONE_NEWNET = 0x40000000
_MAGIC = b"lowtail-probe"


def _enter_netns(netns: str) -> None:
    """Move the calling thread (only it) into the named network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


class _Made(TypedDict, total=False):
    """What the thread that entered the namespace made there, or why it could not."""

    sockets: tuple[socket.socket, socket.socket]
    error: OSError


def packet_sockets_in(netns: str | None, tx_iface: str, rx_iface: str) -> tuple[socket.socket, socket.socket]:
    """A sending and a receiving packet socket on interfaces of another namespace (None:
    this one). A socket
    stays in the namespace it was made in, so a short-lived thread enters the namespace,
    makes them, and ends."""
    made: _Made = {}

    def make() -> None:
        try:
            if netns is not None:
                _enter_netns(netns)
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((tx_iface, 0))
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_PROBE))
            rx.bind((rx_iface, ETH_P_PROBE))
            made["sockets"] = (tx, rx)
        except OSError as e:
            made["error"] = e

    t = threading.Thread(target=make, name="lowtail-netns")
    t.start()
    t.join()
    if "error" in made:
        raise made["error"]
    return made["sockets"]


def wait_forwarding(
    netns: str | None,
    tx_iface: str,
    rx_iface: str,
    src_mac: str,
    dst_mac: str,
    timeout_s: float,
    still_starting: Callable[[], bool] = lambda: True,
) -> float | None:
    """Send a probe frame every 50 ms until one comes back; seconds it took, or None when
    none came back within `timeout_s` (or `still_starting()` turned false: the DuT died)."""
    tx, rx = packet_sockets_in(netns, tx_iface, rx_iface)
    header = (
        bytes.fromhex(dst_mac.replace(":", ""))
        + bytes.fromhex(src_mac.replace(":", ""))
        + ETH_P_PROBE.to_bytes(2, "big")
    )
    start = time.monotonic()
    try:
        while time.monotonic() - start < timeout_s and still_starting():
            tx.send(header + _MAGIC + os.urandom(4) + bytes(33))
            ready, _, _ = select.select([rx], [], [], 0.05)
            while ready:
                frame = rx.recv(2048)
                if frame[14 : 14 + len(_MAGIC)] == _MAGIC:
                    return time.monotonic() - start
                ready, _, _ = select.select([rx], [], [], 0)
        return None
    finally:
        tx.close()
        rx.close()
