"""The import rules between gpuscope's rooms (DESIGN: model <- store, traces, collectors <- analyzers <- figures <-
reports, dashboards <- cli), read from the source: what each package may import, at run time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpuscope"
# package -> the gpuscope packages it may import (itself always); None: anything.
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "format": {"model"},
    "console": {"format"},
    "traces": {"model"},
    "store": {"model"},
    "pricing": {"model"},
    "collectors": {"model", "store"},
    "analyzers": {"model"},
    "figures": {"model", "format", "analyzers", "fleet"},
    "reports": {"model", "format", "console", "analyzers", "figures"},
    "changes": {"model", "analyzers", "gate"},
    "api": {"model", "format", "traces", "store", "pricing", "collectors", "analyzers", "figures", "reports", "torch",
            "changes", "gate"},
}
# Third-party modules a package must not import at run time (they belong to collectors or views).
FORBIDDEN: dict[str, set[str]] = {
    "model": {"psutil", "pynvml", "dash", "plotly", "pandas"},
    "analyzers": {"psutil", "pynvml", "dash", "plotly"},
    "traces": {"psutil", "pynvml", "dash", "plotly", "pandas"},
}


def runtime_imports(path: Path) -> set[str]:
    """Modules a file imports when it runs: ``if TYPE_CHECKING:`` blocks are left out, imports inside functions
    counted."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def layer_imports(layer: str) -> tuple[set[str], set[str]]:
    files = [PACKAGE / f"{layer}.py"] if (PACKAGE / f"{layer}.py").exists() else sorted((PACKAGE / layer).rglob("*.py"))
    mods = set().union(*(runtime_imports(f) for f in files))
    ours = {m.split(".")[1] for m in mods if m.startswith("gpuscope.")} - {layer}
    third = {m.split(".")[0] for m in mods if not m.startswith("gpuscope")}
    return ours, third


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_room_imports_only_the_rooms_below_it(layer: str) -> None:
    ours, third = layer_imports(layer)
    assert ours <= ALLOWED[layer], f"{layer} imports {sorted(ours - ALLOWED[layer])}"
    assert not third & FORBIDDEN.get(layer, set()), f"{layer} imports {sorted(third & FORBIDDEN[layer])}"


def test_the_rule_reads_real_imports() -> None:
    ours, _ = layer_imports("collectors")
    assert "store" in ours and "model" in ours  # the scan sees what is there
