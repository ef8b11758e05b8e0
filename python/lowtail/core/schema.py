"""One rule for every parser of user input: experiment files, import specs, bundle manifests
and rows, and values typed on the command line.

A document read from text (TOML, JSON) is first checked for its shape — how deep it nests,
how many items and how long its strings are, integers a 64-bit column can hold, finite
numbers — without recursion (a file nested 5,000 lists deep is one error, not a crash), then
converted by msgspec into typed Structs: unknown fields refused, ranges from `Meta`, no
coercion ("5" is not 5, true is not 1). msgspec rather than pydantic: it imports in a few
milliseconds on every command, pydantic in more than 100.

Every failure is one `InputError` (a `UserError`, exit 2) that names the file, the line where
the document is a text whose lines can be found (TOML), and the field's path. A field may
carry the house's own wording of its rule (`rule(...)`): "frame_size must be whole numbers
from 64 to 1,518, not 9000".
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from lowtail.core.errors import UserError
from lowtail.core.terminal import shown
from lowtail.core.units import UNIT_KINDS

# What a 64-bit signed column (DuckDB BIGINT, Parquet INT64) holds: every integer lowtail
# stores, so a larger one is refused where it is read, not where DuckDB meets it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Limits of a document read from a file a user hands lowtail: far beyond any real experiment
# file, import spec or manifest, far below what would cost memory or time.
MAX_DEPTH = 32
MAX_NODES = 1_000_000
MAX_STRING = 1 << 20
MAX_TEXT_BYTES = 4 << 20  # an experiment file or import spec

Path = tuple[str | int, ...]
# A place in the source text for a field's path: its line, or None.
Locator = Callable[[Path], int | None]
T = TypeVar("T")


class InputError(UserError):
    """Input that breaks a rule: which file, which line (where known), which field, why."""

    def __init__(self, source: str, reason: str, line: int | None = None, path: Path = ()) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        self.path = path
        where = f"{source} line {line}" if line else source
        super().__init__(f"{where}: {reason}")


_ASCII_WHOLE = re.compile(r"[0-9]+")
_ASCII_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+")


def ascii_digits(text: str, point: bool = False) -> bool:
    """Is `text` a number written in ASCII digits (with one decimal point when `point`)?
    The one check of every id, count, CPU number and percent typed: int(), float() and
    Fraction() also read other scripts' digits ("１" is 1) and separators ("1_0" is 10), so a
    pasted or mistyped value would run with a number the person did not type."""
    return (_ASCII_DECIMAL if point else _ASCII_WHOLE).fullmatch(text) is not None


def rule(says: str, **constraints: Any) -> msgspec.Meta:
    """A field's constraints (msgspec `Meta`: ge, le, min_length, pattern …) with the words a
    broken one is said in ("must be whole numbers from 1 to 65,535")."""
    return msgspec.Meta(**constraints, extra={"says": says})


def with_unit(kind: str) -> msgspec.Meta:
    """A field that takes a duration, a packet rate or an interrupt rate with its unit
    (`units.UNIT_KINDS`): a string or a number reaches the field's reader, which refuses a bare
    number naming the field (`budget = 350` is not 350 s); anything else is refused here. Tests
    find every such field by this mark."""
    forms = UNIT_KINDS[kind][2]
    return msgspec.Meta(extra={"says": f"must be a {kind} with its unit, such as {forms}", "unit": kind})


# A value of a field `with_unit`: what its reader takes (a number only to refuse it by name).
UnitValue = str | int | float


def dotted(path: Path) -> str:
    """A field's path as people read it: `traffic.rates[2]`, `dut[0].name`; a key from the
    document with a control character in it shown with its escape (a path is said in one line)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{shown(part)}" if out else shown(part))
    return out or "(the document)"


# -- reading text ------------------------------------------------------------------------------


def decode_text(data: bytes, source: str, limit: int = MAX_TEXT_BYTES) -> str:
    """Bytes of a user's file as text: at most `limit` bytes, UTF-8."""
    if len(data) > limit:
        raise InputError(source, f"is {len(data):,} bytes; lowtail reads files of this kind up to {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(source, f"not UTF-8 text (byte {e.start})") from None


def load_toml(text: str, source: str) -> dict[str, object]:
    """A TOML document whose shape is within the limits; a syntax error names its line and
    column first, as compilers do. Its tables are as the user wrote them (hence `object`): the
    caller's checks narrow each value to what it must be."""
    if len(text) > MAX_TEXT_BYTES:
        raise InputError(
            source, f"is {len(text):,} characters; lowtail reads files of this kind up to {MAX_TEXT_BYTES:,}"
        )
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise InputError(source, f"nested more than {MAX_DEPTH} levels deep", _deepest_line(text)) from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(e))
        if m:
            where = f"{source} line {m.group(1)}, column {m.group(2)}"
        elif "end of document" in str(e):
            where = f"{source} line {len(text.splitlines()) or 1} (end of file)"
        else:
            where = source
        raise UserError(f"{where}: not valid TOML: {reason}") from None
    check_shape(doc, source, TomlLines(text).line)
    return doc


def _deepest_line(text: str) -> int | None:
    """The first line that opens more brackets than MAX_DEPTH (where a nesting bomb is)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.count("[") + line.count("{") > MAX_DEPTH:
            return number
    return None


def load_json(data: bytes, source: str, limit: int) -> Any:
    """A JSON document of at most `limit` bytes whose shape is within the limits."""
    decode_text(data, source, limit)
    try:
        doc = msgspec.json.decode(data)
    except RecursionError:
        raise InputError(source, f"nested more than {MAX_DEPTH} levels deep") from None
    except msgspec.DecodeError as e:
        raise InputError(source, f"not valid JSON ({e})") from None
    check_shape(doc, source)
    return doc


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deep a JSON text nests (brackets inside strings aside), without parsing it: a
    stored value is checked before any reader's recursion meets it."""
    depth = deepest = 0
    for c in _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if c in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def check_shape(
    doc: Any, source: str, locate: Locator | None = None, names: Callable[[Path], str] | None = None
) -> None:
    """Refuse a document nested deeper than MAX_DEPTH, with more than MAX_NODES values,
    strings longer than MAX_STRING, integers outside 64 bits or numbers that are not finite.
    Iterative: no input can exhaust the interpreter's stack. `names` words a field's path."""
    name = names or dotted
    stack: list[tuple[Any, Path]] = [(doc, ())]
    nodes = 0
    while stack:
        value, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise InputError(source, f"holds more than {MAX_NODES:,} values")
        if len(path) > MAX_DEPTH:
            raise _located(source, f"{name(path[:4])}…: nested more than {MAX_DEPTH} levels deep", path, locate)
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or len(key) > MAX_STRING:
                    raise _located(source, f"{name(path)}: a key that is not a short string", path, locate)
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise _located(source, f"{name(path)}: {_short(value)} is larger than lowtail can hold", path, locate)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _located(source, f"{name(path)}: {value} is not a finite number", path, locate)
        elif isinstance(value, str) and len(value) > MAX_STRING:
            raise _located(source, f"{name(path)}: a string of {len(value):,} characters", path, locate)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + "…" + text[-8:]


def _located(source: str, reason: str, path: Path, locate: Locator | None) -> InputError:
    return InputError(source, reason, locate(path) if locate else None, path)


# -- converting into types -----------------------------------------------------------------------


def convert(
    doc: Any,
    type_: type[T] | Any,
    source: str,
    locate: Locator | None = None,
    prefix: Path = (),
    names: Callable[[Path], str] = dotted,
) -> T:
    """`doc` as `type_` (msgspec, strict), or one InputError naming the source, the line
    (`locate`) and the field (`names` words a path; `prefix` is where `doc` sits in its
    document)."""
    check_shape(doc, source, locate)
    try:
        return msgspec.convert(doc, type_, strict=True)
    except msgspec.ValidationError as e:
        raise explain(e, doc, type_, source, locate, prefix, names) from None


_AT = re.compile(r"^(?P<message>.*?)(?: - at `(?P<path>[^`]*)`(?: in `(?P<outer>[^`]*)`)?)?$", re.S)
_PART = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_TYPE_WORDS = {
    "int": "a whole number",
    "str": "a string",
    "bool": "true or false",
    "float": "a number",
    "array": "a list",
    "object": "a table",
    "null": "nothing",
}


def explain(
    e: msgspec.ValidationError,
    doc: Any,
    type_: Any,
    source: str,
    locate: Locator | None = None,
    prefix: Path = (),
    names: Callable[[Path], str] = dotted,
) -> InputError:
    """msgspec's error in the house's words, at the field's line."""
    text = str(e)
    m = _AT.match(text)
    if m is None:
        return InputError(source, text, locate(prefix) if locate else None, prefix)
    path = _parse_path(m.group("outer") or m.group("path") or "$")
    message = m.group("message")
    full = (*prefix, *path)
    line = locate(full) if locate else None
    info = _info_at(msgspec.inspect.type_info(type_), doc, path)
    unknown = re.match(r"Object contains unknown field `(.*)`", message)
    if unknown:
        key = unknown.group(1)
        known = [f.encode_name for f in info.fields] if isinstance(info, msgspec.inspect.StructType) else []
        line = locate((*full, key)) if locate else line
        return InputError(source, unknown_key(key, known, names(full)), line, (*full, key))
    missing = re.match(r"Object missing required field `(.*)`", message)
    if missing:
        return InputError(source, f"{names(full)} needs `{missing.group(1)}`", line, full)
    value, found = _value_at(doc, path)
    says = _says(msgspec.inspect.type_info(type_), doc, path)
    name = names(full)
    shown = f", not {_short(value)}" if found else ""
    if says and says.startswith(":"):
        return InputError(source, f"{name}{says}", line, full)
    if says:
        return InputError(source, f"{name} {says}{shown}", line, full)
    expected = re.match(r"Expected `([^`]*)`(.*?)(?:, got `([^`]*)`)?$", message)
    if expected:
        # TOML has no null: "a table", not "a table or nothing".
        words = [_TYPE_WORDS.get(k.strip(), k.strip()) for k in expected.group(1).split("|") if k.strip() != "null"]
        kinds = " or ".join(words) or "nothing"
        return InputError(source, f"{name} must be {kinds}{expected.group(2)}{shown}", line, full)
    return InputError(source, f"{name}: {message[0].lower() + message[1:]}", line, full)


def unknown_key(key: str, known: Iterable[str], where: str) -> str:
    """ "unknown key 'rats' in [traffic] (did you mean 'rates'? known: …)"."""
    known = sorted(known)
    return f"unknown key {key!r} in {where} ({did_you_mean(key, known)}known: {', '.join(known) or 'none'})"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """ "did you mean 'rates'? " for the known name closest to a mistyped one (also one it
    starts or ends: `rule` for `rules`), else ""."""
    import difflib  # only when a name is mistyped

    known = list(known)
    close = (
        difflib.get_close_matches(word, known, n=1)
        or [k for k in known if len(word) >= 3 and (k.startswith(word) or word.startswith(k))][:1]
    )
    return f"did you mean {close[0]!r}? " if close else ""


def _parse_path(text: str) -> Path:
    parts: list[str | int] = []
    for m in _PART.finditer(text.removeprefix("$")):
        if m.group(1) is not None:
            parts.append(m.group(1))
        elif m.group(2) != "...":
            parts.append(int(m.group(2)))
        else:
            break  # a dict key msgspec does not name: the path ends at the dict
    return tuple(parts)


def _value_at(doc: Any, path: Path) -> tuple[Any, bool]:
    for part in path:
        try:
            doc = doc[part]
        except (KeyError, IndexError, TypeError):
            return None, False
    return doc, True


def _unwrap(info: Any) -> tuple[Any, str | None]:
    """A type without its Metadata layers, and the innermost rule's words among them."""
    says = None
    while isinstance(info, msgspec.inspect.Metadata):
        says = (info.extra or {}).get("says") or says
        info = info.type
    return info, says


_CONTAINERS = (msgspec.inspect.ListType, msgspec.inspect.TupleType, msgspec.inspect.SetType)
_TABLES = (msgspec.inspect.StructType, msgspec.inspect.DictType)


_SCALARS: dict[type, tuple[type, ...]] = {
    bool: (msgspec.inspect.BoolType,),
    int: (msgspec.inspect.IntType, msgspec.inspect.FloatType),
    float: (msgspec.inspect.FloatType,),
    str: (msgspec.inspect.StrType, msgspec.inspect.LiteralType, msgspec.inspect.EnumType),
    type(None): (msgspec.inspect.NoneType,),
}


def _pick(info: Any, value: Any) -> Any:
    """The member of a union a value is read as: the one of its kind (a list's, a table's, a
    number's …), else the first that words its rule, else the first that is not None."""
    bare, _ = _unwrap(info)
    if not isinstance(bare, msgspec.inspect.UnionType):
        return info
    if isinstance(value, list):
        kinds: tuple[type, ...] = _CONTAINERS
    elif isinstance(value, dict):
        kinds = _TABLES
    else:
        kinds = _SCALARS.get(type(value), ())
    members = list(bare.types)
    for member in members:
        if isinstance(_unwrap(member)[0], kinds):
            return member
    for member in members:
        if _unwrap(member)[1]:
            return member
    return next((m for m in members if not isinstance(_unwrap(m)[0], msgspec.inspect.NoneType)), None)


def _step(info: Any, value: Any, part: str | int) -> Any:
    """The type of `value[part]` inside a value of type `info` (None when unknown)."""
    info, _ = _unwrap(_pick(info, value))
    if isinstance(info, msgspec.inspect.StructType) and isinstance(part, str):
        return next((f.type for f in info.fields if f.encode_name == part), None)
    if isinstance(info, msgspec.inspect.DictType):
        return info.value_type
    if isinstance(info, msgspec.inspect.ListType):
        return info.item_type
    return None


def _info_at(info: Any, doc: Any, path: Path) -> Any:
    for part in path:
        if info is None:
            return None
        info = _step(info, doc, part)
        doc, _ = _value_at(doc, (part,))
    return _unwrap(_pick(info, doc))[0] if info is not None else None


def _says(info: Any, doc: Any, path: Path) -> str | None:
    """The house's wording of the innermost rule along `path` (a list's items inherit their
    list's)."""
    says = None
    for part in (None, *path):
        if info is None:
            break
        if part is not None:
            info = _step(info, doc, part)
            doc, _ = _value_at(doc, (part,))
        _, found = _unwrap(info)
        says = found or says
        if info is not None:
            _, found = _unwrap(_pick(_unwrap(info)[0], doc))
            says = found or says
    return says


# -- finding a field's line in TOML text ---------------------------------------------------------


class TomlLines:
    """Where a field of a TOML document is written: the line of `key =` under its table's
    header (`[a.b]`, the index-th `[[a]]`), else the header's line. Best effort: a value
    written inline (`traffic = {rates = [1]}`) is found at its table's key."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _tables(self) -> list[tuple[str, int, int]]:
        """(dotted name, occurrence index, line) of every table header."""
        seen: dict[str, int] = {}
        out = []
        for number, line in enumerate(self.lines, 1):
            m = self._HEADER.match(line)
            if m:
                name = re.sub(r"\s*\.\s*", ".", m.group(2)).replace('"', "")
                index = seen.get(name, -1) + 1 if m.group(1) == "[[" else 0
                seen[name] = index
                out.append((name, index, number))
        return out

    def line(self, path: Path) -> int | None:
        """The line of the field at `path` (strings are keys, ints list indexes)."""
        names = [p for p in path if isinstance(p, str)]
        indexes = [p for p in path if isinstance(p, int)]
        index = indexes[0] if indexes and len(path) > 1 and isinstance(path[1], int) else 0
        tables = self._tables()
        # The deepest table header that is a prefix of the path, then the key under it.
        for depth in range(len(names), -1, -1):
            table = ".".join(names[:depth])
            key = names[depth] if depth < len(names) else None
            spans = self._spans(tables, table, index if depth else 0)
            if spans is None:
                continue
            start, end = spans
            if key is None:
                return start or None
            for number in range(start + 1 if start else 1, end):
                line = self.lines[number - 1]
                if self._HEADER.match(line):
                    break
                if re.match(rf"^\s*\"?{re.escape(key)}\"?\s*(=|\.)", line):
                    return number
            if depth:
                return start
        return None

    def _spans(self, tables: list[tuple[str, int, int]], table: str, index: int) -> tuple[int, int] | None:
        """The lines of a table's body: (header line, the next header's line)."""
        if not table:
            first = tables[0][2] if tables else len(self.lines) + 1
            return 0, first
        for i, (name, occurrence, number) in enumerate(tables):
            if name == table and occurrence == index:
                end = tables[i + 1][2] if i + 1 < len(tables) else len(self.lines) + 1
                return number, end
        return None
