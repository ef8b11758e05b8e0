"""Text from files and stored data is data on a terminal: its control characters are shown
escaped, never sent.

A name in a bundle or a database (an experiment, a DuT, `origin.host`, a rule file's path) may
hold ESC, OSC, NUL or C1 codes; printed raw, it could clear the screen, set the window title,
plant a hyperlink or hide the rest of a line. `escape` is the one function that turns every
such character into its Python escape (`\\x1b`, `\\x9b`, `\\u202e`): C0 and C1 controls, DEL,
and the bidirectional and line-separator formatting characters that reorder or break what a
person reads. Every console of the command line (cli/_output.py) passes what it writes through
it, so tables and messages are covered at once; `shown` is for a value quoted inside a
message or measured for a column's width before the console sees it.
"""

from __future__ import annotations

import re

# DEL and C1; the bidirectional overrides, isolates and marks; the line and paragraph
# separators; the byte-order mark.
_FORMATTING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_ANY_CONTROL = re.compile(f"[\x00-\x1f{_FORMATTING}]")
# What a console writes line by line: its own newlines are the layout, not data.
_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_FORMATTING}]")


def _code(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control character written as its escape; newlines kept when
    `keep_newlines` (a console's own line breaks)."""
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _ANY_CONTROL
    return pattern.sub(_code, text) if pattern.search(text) else text


def shown(value: object) -> str:
    """A value from a file or stored data as a message or a table cell shows it: its text
    with every control character escaped (newlines and tabs too)."""
    return escape(str(value))


def has_control(text: str) -> bool:
    """Does `text` hold a character `escape` would escape (newlines aside)?"""
    return _CONTROL_BUT_NEWLINE.search(text) is not None
