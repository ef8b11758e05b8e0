"""docs/architecture.md's module tables stay in step with the tree: every module of the
Python package is in one of the tables of its "Python package" part (a package's
`__init__.py` too, unless it holds only its docstring), and every file those tables name
exists; the bench table names every benchmark in bench/ and nothing else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "lowtail"
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _part(heading: str) -> str:
    start = DOC.index(f"\n## {heading}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end >= 0 else len(DOC)]


def _first_column_names(text: str) -> set[str]:
    """The file names in the first column of every table row of `text`."""
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            names |= {n for n in re.findall(r"`([^`]+)`", line.split("|")[1]) if "." in n}
    return names


def _only_a_docstring(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


def test_every_python_module_is_in_a_table_and_every_listed_file_exists():
    listed = _first_column_names(_part("Python package"))
    modules = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if not (p.name == "__init__.py" and p.parent != PACKAGE and _only_a_docstring(p))
    }
    assert sorted(modules - listed) == [], "modules docs/architecture.md does not list"
    missing = sorted(n for n in listed if "*" not in n and "<" not in n and not (PACKAGE / n).exists())
    assert missing == [], "listed in docs/architecture.md, not in python/lowtail"


def test_the_bench_table_names_every_benchmark():
    listed = _first_column_names(_part("Benchmarks"))
    present = {p.name for p in (ROOT / "bench").iterdir() if p.suffix in (".py", ".sql")}
    assert listed == present
