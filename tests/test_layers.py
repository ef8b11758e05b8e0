"""The package's layout is its architecture (docs/architecture.md): data flows one way,
captures → matched series → figures/models → store → pages, and no module needs one that
needs it back. Read from the import statements of every module (at the top or inside a
function: a lazy import is still a dependency), the package's face and its native module
included.

The floors, from the ground up:
- `core`: the shared vocabulary (units, percentiles, errors, …) imports only itself and the
  native module;
- documents (`<stage>/document.py`): the JSON documents the stages hand each other and the
  store keeps, typed; they import only `core` and each other;
- the store: SQL and the typed codec; it imports `core` and the documents, no stage;
- the page toolkit (`report/`) and each stage's page (`<stage>/page.py`, its sections): drawn
  from what the store holds, never from captures, series, models or the testbed;
- the stages, each a package owning its options, its `*_and_store` and its document;
- the command line on top, which nothing else imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python"
NATIVE = "lowtail._native"


def _modules() -> dict[str, Path]:
    found = {}
    for f in [*(PACKAGE / "lowtail").rglob("*.py"), PACKAGE / "lowtail" / "_native.pyi"]:
        parts = f.with_suffix("").relative_to(PACKAGE).parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The lowtail modules a file imports (`from lowtail.x import y` counts as lowtail.x.y
    when y is a module, else as lowtail.x; `from lowtail import _native` as the native
    module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for a in node.names:
                out.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module)
    return out


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items() if path.suffix == ".py"}
GRAPH[NATIVE] = set()

STAGES = ("host", "testbed", "trace", "analyze", "experiment", "explain", "compare", "models", "tune", "campaign")
PAGE_NAMES = ("page", "section", "certificate_page")


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def is_document(module: str) -> bool:
    return module.endswith(".document")


def is_page(module: str) -> bool:
    return _in("lowtail.report", module) or module.rsplit(".", 1)[-1] in PAGE_NAMES


def _edges(where, allowed) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in GRAPH.items() if where(m) for t in targets if not allowed(t))


def test_core_imports_only_core_and_the_native_module():
    assert _edges(lambda m: _in("lowtail.core", m), lambda t: _in("lowtail.core", t) or t == NATIVE) == []


def test_documents_import_only_core_and_other_documents():
    assert _edges(is_document, lambda t: _in("lowtail.core", t) or is_document(t)) == []


def test_the_store_depends_on_no_stage():
    """It keeps every stage's documents, so it names their types, and nothing else of them."""
    allowed = ("lowtail.core", "lowtail.store", NATIVE)
    assert _edges(lambda m: _in("lowtail.store", m), lambda t: is_document(t) or any(_in(a, t) for a in allowed)) == []


def test_pages_read_only_the_store():
    """No captures, series, models, testbed or native code behind a page: what it shows was
    stored first. A page reads the store, the page toolkit, other pages and the documents, and
    the light wording modules of its stage (a verdict's, an explanation's)."""
    wording = ("lowtail.verdict", "lowtail.explain.words", "lowtail.explain.asked", "lowtail.experiment.clocks")
    wording += ("lowtail.experiment.degraded", "lowtail.store", "lowtail.core")
    forbidden = (NATIVE, "lowtail.core.series")

    def allowed(t: str) -> bool:
        return t not in forbidden and (is_page(t) or is_document(t) or any(_in(w, t) for w in wording))

    assert _edges(is_page, allowed) == []


def test_no_computation_draws():
    """A stage computes and stores; its page (and only its page) draws what was stored."""
    assert (
        _edges(lambda m: not is_page(m) and not _in("lowtail.cli", m) and m != "lowtail", lambda t: not is_page(t))
        == []
    )


def test_comparisons_read_series_and_the_store_never_the_testbed():
    bad = ("lowtail.cli", "lowtail.experiment", "lowtail.testbed", "lowtail.api")
    assert (
        _edges(
            lambda m: _in("lowtail.compare", m) and not is_page(m),
            lambda t: is_document(t) or not any(_in(b, t) for b in bad),
        )
        == []
    )


def test_only_the_command_line_imports_the_command_line():
    assert (
        _edges(lambda m: not _in("lowtail.cli", m) and m != "lowtail.__main__", lambda t: not _in("lowtail.cli", t))
        == []
    )


def test_models_never_run_experiments():
    assert (
        _edges(lambda m: _in("lowtail.models", m), lambda t: is_document(t) or not _in("lowtail.experiment", t)) == []
    )


def test_explanations_and_traces_never_run_the_testbed():
    """`lowtail explain` reads stored runs, their series and traces, and stores what it
    concludes. Recording a trace knows nothing of the analysis or the store."""
    bad = ("lowtail.cli", "lowtail.experiment", "lowtail.testbed")
    assert (
        _edges(
            lambda m: _in("lowtail.explain", m) and not is_page(m),
            lambda t: is_document(t) or not any(_in(b, t) for b in bad),
        )
        == []
    )
    bad = ("lowtail.cli", "lowtail.explain", "lowtail.store", "lowtail.report")
    assert _edges(lambda m: _in("lowtail.trace", m), lambda t: is_document(t) or not any(_in(b, t) for b in bad)) == []


def test_recording_a_trace_needs_no_testbed():
    """The testbed's hosts record with trace/tracefs.py's `Shell`; the trace sees the testbed,
    its DuT and core plan through trace/protocol.py, never by importing them (a loop)."""
    assert _edges(lambda m: _in("lowtail.trace", m), lambda t: not _in("lowtail.testbed", t)) == []


def test_the_package_face_and_the_api_stay_on_top():
    """`lowtail.open` and `lowtail.api` hand the stages to Python users: no stage imports them."""
    top = ("lowtail", "lowtail.api", "lowtail.__main__")
    assert _edges(lambda m: m not in top and not _in("lowtail.cli", m), lambda t: t not in top) == []


def test_every_stage_is_a_package():
    for stage in STAGES:
        assert stage in {m.split(".")[1] for m in MODULES if m.count(".") >= 2}, stage
    loose = sorted(m for m, p in MODULES.items() if m.count(".") == 1 and p.parent.name == "lowtail")
    assert loose == ["lowtail.__main__", "lowtail._native", "lowtail.api"]


def test_no_import_cycles():
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
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
