"""The kernel's ftrace ring buffer as `per_cpu/cpuN/trace_pipe_raw` hands it out, and the
event formats (`events/SYS/NAME/format`) that say where each field of an event lies.

A page (a sub-buffer) is a header — the timestamp its first event counts from (u64), its
commit word (bytes of data in the low 27 bits; bit 31: events were lost before it) — and
events, each a 32-bit header (type_len: 5 bits, time_delta: 27 bits) and its data:

    type_len 1-28   data of type_len·4 bytes follows
    type_len 0      a u32 length (counting itself) and the data
    29              padding (a time delta of 0: the rest of the page)
    30              time extend: the delta's upper bits in the next u32
    31              absolute timestamp, its upper bits in the next u32

This is the layout libtraceevent's kbuffer reads; it is parsed here rather than through
that C library because lowtail needs a few fixed events of it, and a Python wheel of
libtraceevent is not kept on the package index.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

_COMMIT_MASK = (1 << 27) - 1
_MISSED_EVENTS = 1 << 31
_PADDING, _TIME_EXTEND, _TIME_STAMP = 29, 30, 31
_TS_LOW_BITS = (1 << 59) - 1
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<QQ")


class TraceFormatError(Exception):
    """A format file or a page that does not read as the kernel writes them."""


@dataclass(frozen=True)
class Field:
    """One field of an event: where it lies in the event's data and how to read it."""

    name: str
    offset: int
    size: int
    signed: bool
    data_loc: bool  # a (length << 16 | offset) word pointing at a string in the event
    text: bool  # a char array: a NUL-terminated string


@dataclass(frozen=True)
class EventFormat:
    """An event's id and fields (common_type, common_pid, … and its own)."""

    system: str
    name: str
    id: int
    fields: dict[str, Field]

    @property
    def key(self) -> str:
        return f"{self.system}/{self.name}"

    def read(self, data: bytes, base: int, name: str) -> int | str:
        """Field `name` of the event whose data starts at `base` in `data`."""
        f = self.fields[name]
        start = base + f.offset
        if f.data_loc:
            (loc,) = _U32.unpack_from(data, start)
            s = base + (loc & 0xFFFF)
            return data[s : s + (loc >> 16)].split(b"\0", 1)[0].decode(errors="replace")
        if f.text:
            end = start + f.size if f.size else None
            return data[start:end].split(b"\0", 1)[0].decode(errors="replace")
        return int.from_bytes(data[start : start + f.size], "little", signed=f.signed)


_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d+);")


def parse_format(key: str, text: str) -> EventFormat:
    """An event format file's id and fields; `key` is "system/name"."""
    system, _, name = key.partition("/")
    m = re.search(r"^ID:\s*(\d+)", text, re.MULTILINE)
    if not m:
        raise TraceFormatError(f"the format of {key} names no ID")
    fields = {}
    for f in _FIELD.finditer(text):
        decl = f.group("decl").strip()
        data_loc = decl.startswith("__data_loc")
        field_name = decl.split()[-1]
        text_field = False
        if "[" in field_name:
            field_name = field_name.split("[", 1)[0]
            text_field = decl.replace("__data_loc", "").strip().startswith("char")
        fields[field_name] = Field(
            field_name, int(f.group("offset")), int(f.group("size")), f.group("signed") == "1", data_loc, text_field
        )
    return EventFormat(system, name, int(m.group(1)), fields)


@dataclass(frozen=True)
class PageStats:
    """What the pages of one CPU held: pages, and pages after which the kernel lost events."""

    pages: int
    pages_with_loss: int


def page_events(buf: bytes, page_size: int) -> Iterator[tuple[int, int, int]]:
    """(timestamp, offset of the data in `buf`, length) of every data event in a CPU's
    pages, in time order."""
    for page in range(0, len(buf) - 15, page_size):
        ts, commit = _HEADER.unpack_from(buf, page)
        size = commit & _COMMIT_MASK
        p, end = page + 16, min(page + 16 + size, page + page_size, len(buf))
        while p + 4 <= end:
            (h,) = _U32.unpack_from(buf, p)
            type_len, delta = h & 0x1F, h >> 5
            if type_len == _PADDING:
                if delta == 0:
                    break
                (length,) = _U32.unpack_from(buf, p + 4)
                p += 4 + length
            elif type_len == _TIME_EXTEND:
                (ext,) = _U32.unpack_from(buf, p + 4)
                ts += (ext << 27) | delta
                p += 8
            elif type_len == _TIME_STAMP:
                (ext,) = _U32.unpack_from(buf, p + 4)
                ts = ((ext << 27) | delta) | (ts & ~_TS_LOW_BITS)
                p += 8
            elif type_len == 0:
                (length,) = _U32.unpack_from(buf, p + 4)
                ts += delta
                length -= 4
                if p + 8 + length > end:
                    raise TraceFormatError(f"an event at byte {p} runs past its page")
                yield ts, p + 8, length
                p += 8 + ((length + 3) & ~3)
            else:
                ts += delta
                yield ts, p + 4, type_len * 4
                p += 4 + type_len * 4


def page_stats(buf: bytes, page_size: int) -> PageStats:
    """How many pages a CPU's buffer held, and after how many of them events were lost."""
    pages = lost = 0
    for page in range(0, len(buf) - 15, page_size):
        _, commit = _HEADER.unpack_from(buf, page)
        pages += 1
        lost += bool(commit & _MISSED_EVENTS)
    return PageStats(pages, lost)
