"""The command line is thin: a command parses its options into the stage's, calls the stage
and renders what came back (docs/architecture.md). Every function of cli/ — counted from its
`def` line to its last, the parameter list included — stays within MAX_LINES: a command's
options are declared once as module-level `Annotated` aliases, a line each in its signature;
orchestration that grows past it belongs in the stage (an `*_and_store`, a stage's options),
and rendering in a helper of the command's module."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "python" / "lowtail" / "cli"
MAX_LINES = 60


def _is_command(decorator: ast.expr) -> bool:
    """`@app.command(...)`, `@some_app.command(...)` or `@app.callback(...)`."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr in ("command", "callback")


def _lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from its `def` to its last (its decorators not counted)."""
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def _functions(tree: ast.AST, path: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of a module, nested ones and methods included ("PATH:NAME:LINE")."""
    return {
        f"{path}:{node.name}:{node.lineno}": node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _cli_functions() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found = {}
    for path in sorted(CLI.rglob("*.py")):
        found |= _functions(ast.parse(path.read_text(), str(path)), str(path.relative_to(CLI.parent)))
    return found


def test_every_command_is_found():
    """The measure sees the commands (a decorator spelled otherwise would hide them all)
    and the helpers beside them."""
    functions = _cli_functions()
    commands = {
        name.rsplit(":", 1)[0] for name, node in functions.items() if any(_is_command(d) for d in node.decorator_list)
    }
    assert {"cli/analyze.py:analyze", "cli/model.py:simulate", "cli/campaign.py:campaign_analyze"} <= commands
    assert len(commands) >= 40
    assert len(functions) > len(commands) + 40


def test_no_function_is_longer_than_the_limit():
    too_long = {name: _lines(node) for name, node in _cli_functions().items() if _lines(node) > MAX_LINES}
    assert too_long == {}, (
        f"functions of cli/ past {MAX_LINES} lines (def to end): declare the options as Annotated aliases, "
        "move the work into the stage or a helper"
    )


def test_the_measure_counts_a_function_past_the_limit():
    """The same measure on a command written long fails it (the test can fail), and it counts
    the parameter list: a signature alone past the limit is too long."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (node,) = _functions(ast.parse(f"@app.command()\ndef long(a: int = 1) -> None:\n{body}\n"), "x").values()
    assert any(_is_command(d) for d in node.decorator_list)
    assert _lines(node) == MAX_LINES + 1
    params = "\n".join(f"    a{i}: int = {i}," for i in range(MAX_LINES))
    (node,) = _functions(ast.parse(f"def wide(\n{params}\n) -> None:\n    pass\n"), "x").values()
    assert _lines(node) > MAX_LINES
    (node,) = _functions(ast.parse("@app.command()\ndef short() -> None:\n    pass\n"), "x").values()
    assert _lines(node) == 2
