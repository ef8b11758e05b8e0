"""The options a DuT kind accepts in the experiment file, one type per kind of value. A kind
declares its options as a dict of these (`Dut.options`: their order, help and checks);
each type checks and normalises a value (ValueError with a readable reason
otherwise), and options shared by several kinds are one object reused, not a branch repeated:
`PROCESS_OPTIONS` (how a DuT process is contained and pinned) and `RULES` (a rule set:
nftables and Suricata).

A configuration, once checked, is typed: each kind's `Dut.Options`, a `DutOptions` struct
(msgspec, testbed/document.py) whose fields are its options with their defaults, carried
from the experiment file through the testbed into the store (as the JSON object of its
fields, `options_json`) and read back into the same struct (`options_from_json`, where older
stored shapes are upgraded). An option here holds its help and its check, not its default.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from lowtail.core.errors import UserError
from lowtail.core.files import read_input
from lowtail.core.units import format_duration_setting, parse_duration_ns
from lowtail.testbed.containment import MODES
from lowtail.testbed.document import RuleFile, RulesValue
from lowtail.testbed.system import home_path


@dataclass(frozen=True)
class Option:
    """One option: its help; `check` turns a value of the file into the one a configuration
    holds (its default is its field's in the kind's struct). `list_valued`: a list is one
    value (a sweep is a list of lists)."""

    help: str = ""
    list_valued: bool = field(default=False, init=False)

    def check(self, value: object) -> object:
        return value


@dataclass(frozen=True)
class IntOption(Option):
    minimum: int = 0

    def check(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise ValueError(f"must be a whole number ≥ {self.minimum}, not {value!r}")
        return value


@dataclass(frozen=True)
class StrOption(Option):
    def check(self, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be a non-empty string, not {value!r}")
        return value


@dataclass(frozen=True)
class TextOption(Option):
    """A string that may be empty (stripped)."""

    def check(self, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {value!r}")
        return value.strip()


@dataclass(frozen=True)
class BoolOption(Option):
    def check(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, not {value!r}")
        return value


@dataclass(frozen=True)
class ChoiceOption(Option):
    choices: tuple[str, ...] = ()

    def check(self, value: object) -> str:
        if value not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}, not {value!r}")
        return str(value)


@dataclass(frozen=True)
class CpusOption(Option):
    list_valued: bool = field(default=True, init=False)

    def check(self, value: object) -> list[int]:
        if not isinstance(value, list) or not value or not all(_is_core(c) for c in value):
            raise ValueError(f"must be a list of core numbers such as [1] or [2, 3], not {value!r}")
        return sorted(set(value))


def _is_core(value: object) -> bool:
    """A core number: a whole number ≥ 0 (TOML's `true` is none, though Python counts it as 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class DurationOption(Option):
    """A duration with its unit ("10s", "500ms", "3min"; `lowtail help units`), held as the
    grammar writes it ("3min"), so that a configuration reads as typed wherever it is shown
    (reports, `compare`, the qualification record); `seconds` is its value."""

    def check(self, value: object) -> str:
        try:
            return format_duration_setting(parse_duration_ns(value))
        except UserError as e:
            raise ValueError(str(e)) from None

    @staticmethod
    def seconds(value: str | int) -> float:
        """A configuration's value in seconds (a configuration stored by an older lowtail, or
        built by hand, holds nanoseconds)."""
        return (value if isinstance(value, int) else parse_duration_ns(value)) / 1e9


@dataclass(frozen=True)
class CommandsOption(Option):
    list_valued: bool = field(default=True, init=False)

    def check(self, value: object) -> list[str]:
        if not (isinstance(value, list) and all(isinstance(c, str) and c.strip() for c in value)):
            raise ValueError(f"must be a list of command strings, not {value!r}")
        return value


# -- rule sets ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleSet:
    """A rule set as a configuration holds it: `count` generated rules, the kind's own
    `default` set, `none`, or a user's `path` (with the SHA-256 of its content, so that a run
    records which file it measured and two different files are two configurations)."""

    count: int | None = None
    named: str | None = None  # none | default
    path: str | None = None
    sha256: str | None = None

    def as_value(self) -> RulesValue:
        """What the configuration (and the run's stored DuT options) hold: the number, the
        word, or the file and its hash."""
        if self.count is not None:
            return self.count
        if self.named is not None:
            return self.named
        assert self.path is not None and self.sha256 is not None
        return RuleFile(self.path, self.sha256)

    @classmethod
    def of(cls, value: RulesValue) -> RuleSet:
        """The rule set a configuration's value stands for (`as_value` read back)."""
        if isinstance(value, int):
            return cls(count=value)
        if isinstance(value, RuleFile):
            return cls(path=value.path, sha256=value.sha256)
        return cls(named=value)

    def label(self) -> str:
        """In words: "none", "default", "1,000 rules", "mine.rules (sha 1a2b3c4d)"."""
        if self.count is not None:
            return f"{self.count:,} rule{'' if self.count == 1 else 's'}"
        if self.named is not None:
            return self.named
        return f"{Path(self.path or '').name} (sha {(self.sha256 or '')[:8]})"

    def copy_into(self, directory: Path) -> Path:
        """The user's rules file copied into a run's directory (its data keeps what was
        measured); UserError when the file changed since the experiment file was read."""
        assert self.path is not None
        source = Path(self.path)
        content = read_input(source, "rules file", MAX_RULES_FILE_BYTES, fifo=False)
        if hashlib.sha256(content).hexdigest() != self.sha256:
            raise UserError(
                f"the rules file {source} changed since the experiment file was read (its SHA-256 differs): "
                f"run the experiment again to measure the new rules as a configuration of their own"
            )
        target = directory / f"rules-{self.sha256[:12]}{source.suffix or '.rules'}"
        target.write_bytes(content)
        return target


# A rules file is read whole (hashed, copied into each run's data): far beyond any real rule
# set's text, far below what would cost memory.
MAX_RULES_FILE_BYTES = 64 << 20


def _size(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def count_rules(text: str) -> int:
    """The rules of a rules file: its lines that are neither empty nor comments."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


@dataclass(frozen=True)
class RulesOption(Option):
    """`rules`: a number of generated rules, a word (`named`: those the kind knows, such as
    "none" and "default"), or a path to a rules file, read and hashed when the file is read
    (a file that changes between two runs of a sweep is still the one the first run
    measured: the kind copies it into each run's data and checks the hash). A number, and a
    file's rules, are at most `maximum`, each taking about `bytes_per_rule` of the DuT's
    memory (measured, in the kind's module): the bound is said with the memory it implies. A
    file is a regular file of at most MAX_RULES_FILE_BYTES, named in errors by its resolved
    path, never by its content."""

    named: tuple[str, ...] = ()
    maximum: int = 100_000
    bytes_per_rule: int = 8 << 10

    def bound(self) -> str:
        """The maximum in words, with the memory it implies."""
        return (
            f"at most {self.maximum:,} rules (each takes about {self.bytes_per_rule / 1024:.1f} KiB of memory "
            f"to load: {self.maximum:,} take about {_size(self.maximum * self.bytes_per_rule)})"
        )

    def check(self, value: object) -> RulesValue:
        if isinstance(value, bool):
            raise ValueError(f"must be a number of rules, {self._words()} or a rules file, not {value!r}")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"must be a number of rules ≥ 0, not {value}")
            if value > self.maximum:
                raise ValueError(f"must be {self.bound()}, not {value:,}")
            return value
        if isinstance(value, RuleFile):  # a configuration again
            return value
        if isinstance(value, dict) and set(value) == {"path", "sha256"}:  # a stored configuration again
            return RuleFile(str(value["path"]), str(value["sha256"]))
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be a number of rules, {self._words()} or a rules file, not {value!r}")
        if value in self.named:
            return value
        try:
            resolved = home_path(value).resolve()
        except ValueError as e:
            raise ValueError(f"must be a number of rules, {self._words()} or a rules file; {e}") from None
        if not resolved.is_file():
            raise ValueError(
                f"must be a number of rules, {self._words()} or a rules file; there is no file {value!r} ({resolved})"
            )
        try:
            content = read_input(resolved, "rules file", MAX_RULES_FILE_BYTES, fifo=False)
        except UserError as e:
            raise ValueError(str(e)) from None
        rules = count_rules(content.decode("utf-8", "replace"))
        if rules > self.maximum:
            raise ValueError(f"the rules file {resolved} holds {rules:,} rules; lowtail loads {self.bound()}")
        return RuleSet(path=str(resolved), sha256=hashlib.sha256(content).hexdigest()).as_value()

    def _words(self) -> str:
        return " or ".join(f'"{w}"' for w in self.named) if self.named else "a word"


PROCESS_OPTIONS: dict[str, Option] = {
    "containment": ChoiceOption(
        help="bare (an ordinary process) or container (own PID, mount and UTS namespaces, an exclusive "
        "cpuset, reserved memory)",
        choices=MODES,
    ),
    "cpus": CpusOption(help="cores the DuT runs on [default: the core plan's DuT cores]"),
    "memory_reservation": IntOption(help="container: memory reserved for the DuT, MiB"),
}
