"""What a name for a stored result (a label) may be: one line of at most
`LABEL_MAX_CHARACTERS` printable characters. A label is shown in tables, lists and pages: a
newline split every table row it was shown in, and a control character is nothing a reader
can see. The command line's `--label` (cli/_options.LabelType) and the Python API
(lowtail.api) both ask here."""

from __future__ import annotations

import unicodedata

from lowtail.core.errors import UserError

LABEL_MAX_CHARACTERS = 200


def label_problem(text: str) -> str | None:
    """Why `text` cannot be a label, in words for the user; None when it can."""
    if not text.strip():
        return "give a name (it is empty)"
    if any(unicodedata.category(c) == "Cc" for c in text):
        return "a name is one line of text, without control characters (a newline, a tab, an escape)"
    if len(text) > LABEL_MAX_CHARACTERS:
        return f"a name of at most {LABEL_MAX_CHARACTERS} characters, not {len(text):,}"
    return None


def checked_label(label: str | None) -> str | None:
    """`label` itself (None stays None), or UserError saying why it cannot be one."""
    if label is None:
        return None
    if not isinstance(label, str):
        raise UserError(f"label: a name is text, not {type(label).__name__}")
    problem = label_problem(label)
    if problem is not None:
        raise UserError(f"label {label[:40]!r}{'…' if len(label) > 40 else ''}: {problem}")
    return label
