"""The package's layout is its architecture (docs/architecture.md): data flows one way,
captures → matched series → figures/models → store → report, and no module needs one that
needs it back. Read from the import statements of every module (at the top or inside a
function: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python"


def _modules() -> dict[str, Path]:
    found = {}
    for f in (PACKAGE / "lowtail").rglob("*.py"):
        parts = f.with_suffix("").relative_to(PACKAGE).parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The lowtail modules a file imports (`from lowtail.x import y` counts as lowtail.x.y
    when y is a module, else as lowtail.x)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for a in node.names:
                out.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module)
    return out


GRAPH = {name: _imports(path) - {name, "lowtail"} for name, path in MODULES.items()}


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def _reaching(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if _in(package, m)
        for t in targets
        if any(_in(f, t) for f in forbidden)
    )


def test_the_report_reads_only_the_store():
    """No captures, series, models, testbed or native code behind a report: what it shows
    was stored first."""
    bad = ("lowtail._native", "lowtail.analysis", "lowtail.series", "lowtail.models", "lowtail.experiment")
    later = ("lowtail.compare", "lowtail.selection", "lowtail.bundle", "lowtail.api")
    assert _reaching("lowtail.report", bad + later + ("lowtail.testbed", "lowtail.cli")) == []


def test_the_store_depends_on_nothing_later_or_higher():
    bad = ("lowtail.models", "lowtail.report", "lowtail.experiment", "lowtail.cli", "lowtail.testbed")
    later = ("lowtail.compare", "lowtail.selection", "lowtail.bundle", "lowtail.api")
    assert _reaching("lowtail.store", bad + later) == []


def test_comparisons_read_series_and_the_store_and_never_draw():
    """A comparison is computed from stored runs and their series and stored; its page is
    the report's business, reading only what was stored."""
    bad = ("lowtail.report", "lowtail.cli", "lowtail.experiment", "lowtail.testbed", "lowtail.api")
    assert _reaching("lowtail.compare", bad) == []
    assert _reaching("lowtail.selection", bad + ("lowtail.compare",)) == []


def test_only_the_command_line_imports_the_command_line():
    outside = [
        e for e in _reaching("lowtail", ("lowtail.cli",)) if not e.startswith(("lowtail.cli", "lowtail.__main__"))
    ]
    assert outside == []


def test_models_write_to_the_store_and_never_draw():
    assert _reaching("lowtail.models", ("lowtail.report", "lowtail.experiment")) == []


def test_explanations_and_traces_are_computed_and_stored_never_drawn():
    """`lowtail explain` reads stored runs, their series and traces, and stores what it
    concludes; the report shows it. Recording a trace knows nothing of the analysis."""
    assert (
        _reaching("lowtail.explain", ("lowtail.report", "lowtail.cli", "lowtail.experiment", "lowtail.testbed")) == []
    )
    assert _reaching("lowtail.trace", ("lowtail.report", "lowtail.cli", "lowtail.explain", "lowtail.store")) == []


def test_no_import_cycles():
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []
