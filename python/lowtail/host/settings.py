"""One reader and one writer per kind of host setting, shared by `host apply`, `host undo`,
`tune`'s trials and the host-state fingerprint, so that what is restored is always what was
read.

The kernel shows a setting in its own form, which is not always what it takes back:

    selected      "always [madvise] never": the bracketed word is the value, and only it
                  can be written (writing the whole line is EINVAL)
    cpulist       "0-1" or "0,1": a set of CPUs
    mask          "00000000,00000003" or "3": a set of CPUs as a hex mask
    int           "1", " 3600\\n": a number
    controllers   "cpu +cpuset": the cgroup controllers a subtree_control holds
    text          anything else ("performance"): the text as it is

`value(kind, text)` is what a setting means (what apply and undo compare), `restore_text(kind,
text)` what to write to give back what `text` reads as. Reading a setting, writing its
restore text and reading it again gives the first value for every kind
(tests/test_host_settings.py checks it over generated values)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lowtail.core.errors import UserError
from lowtail.host.sysroot import SysRoot, cpumask_to_cpus, cpus_to_cpumask, format_cpulist, parse_cpulist

_SELECTED = re.compile(r"\[([^\]\s]+)\]")


def selected_word(text: str) -> str:
    """The bracketed choice of "always [madvise] never"; the text itself when none is
    bracketed (a sysroot file written "never")."""
    text = text.strip()
    m = _SELECTED.search(text)
    return m.group(1) if m else text


def _controllers(text: str) -> frozenset[str]:
    return frozenset(w.lstrip("+") for w in text.split() if not w.startswith("-"))


@dataclass(frozen=True)
class Kind:
    """How one kind of setting reads (`value`) and what gives a value back (`restore`)."""

    name: str
    value: Callable[[str], Any]
    restore: Callable[[str], str]


def _int_value(text: str) -> int:
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ValueError(text)
    return int(text)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("text", lambda t: t, lambda t: t),
        Kind("int", _int_value, lambda t: str(_int_value(t))),
        Kind("cpulist", lambda t: tuple(parse_cpulist(t)), lambda t: format_cpulist(parse_cpulist(t))),
        Kind("mask", lambda t: tuple(cpumask_to_cpus(t)), lambda t: cpus_to_cpumask(cpumask_to_cpus(t))),
        Kind("selected", selected_word, selected_word),
        # A subtree_control's restore is a switch ("-cpuset"), written as planned.
        Kind("controllers", _controllers, lambda t: t),
    )
}


def value(kind: str, text: str | None) -> Any:
    """What a setting's text means, to compare what is there with what was written (None for
    no text; the stripped text itself when it is not of its kind: it then equals only itself)."""
    if text is None:
        return None
    text = text.strip()
    try:
        return KINDS[kind].value(text)
    except (UserError, ValueError):
        return text


def restore_text(kind: str, text: str) -> str:
    """What to write so that the setting reads as `text` does (the selected word of a
    "[a] b c" line, a cpulist or mask in the kernel's own form, an int without padding); the
    stripped text when it is not of its kind (the kernel then says what it thinks of it)."""
    text = text.strip()
    try:
        return KINDS[kind].restore(text)
    except (UserError, ValueError):
        return text


def read(root: SysRoot, rel: str) -> str | None:
    """A setting's text as the kernel shows it (stripped), None when absent or unreadable."""
    return root.read(rel)


def write(root: SysRoot, rel: str, kind: str, text: str) -> None:
    """Write a setting so that it reads as `text` does (its restore text; OSError as the
    kernel says it)."""
    root.write(rel, restore_text(kind, text))


def same(kind: str, a: str | None, b: str | None) -> bool:
    """Do two texts of a setting mean the same value?"""
    return bool(value(kind, a) == value(kind, b))
