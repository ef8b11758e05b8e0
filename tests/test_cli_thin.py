"""The command line is thin: a command parses its options into the stage's, calls the stage
and renders what came back (docs/architecture.md). What it does — the statements of its body,
its docstring included, after the parameter list that typer reads the options from — stays
within MAX_BODY_LINES; orchestration that grows past it belongs in the stage (an
`*_and_store`, a stage's options), and rendering in a helper of the command's module."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "python" / "lowtail" / "cli"
MAX_BODY_LINES = 60


def _is_command(decorator: ast.expr) -> bool:
    """`@app.command(...)`, `@some_app.command(...)` or `@app.callback(...)`."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr in ("command", "callback")


def _command_bodies() -> dict[str, int]:
    """Each command function of the CLI ("cli/FILE.py:NAME") and the lines of its body."""
    found = {}
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and any(_is_command(d) for d in node.decorator_list):
                assert node.end_lineno is not None
                found[f"{path.relative_to(CLI.parent)}:{node.name}"] = node.end_lineno - node.body[0].lineno + 1
    return found


def test_every_command_is_found():
    """The measure sees the commands (a decorator spelled otherwise would hide them all)."""
    bodies = _command_bodies()
    assert {"cli/analyze.py:analyze", "cli/model.py:simulate", "cli/campaign.py:campaign_analyze"} <= set(bodies)
    assert len(bodies) >= 40


def test_no_command_body_is_longer_than_the_limit():
    too_long = {name: lines for name, lines in _command_bodies().items() if lines > MAX_BODY_LINES}
    assert too_long == {}, f"commands past {MAX_BODY_LINES} lines: move the work into the stage"


def test_the_measure_counts_a_body_past_the_limit():
    """The same measure on a command written long fails it (the test can fail)."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    tree = ast.parse(f"@app.command()\ndef long(a: int = 1) -> None:\n{body}\n")
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef) and any(_is_command(d) for d in node.decorator_list)
    assert node.end_lineno is not None and node.end_lineno - node.body[0].lineno + 1 > MAX_BODY_LINES
