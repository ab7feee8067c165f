"""The import rules between gpuscope's rooms, read from the source, at run time (``if TYPE_CHECKING:`` blocks left
out; imports inside functions counted: a lazy import defers a cost, it does not undo a dependency):

- each room (a subpackage, or a module at the top of ``gpuscope/``) imports only the rooms under it in ``ALLOWED``
  (DESIGN: model <- store, traces, pricing, collectors <- analyzers <- figures <- reports <- api, fleet <-
  dashboards <- cli), and every room has its entry;
- no two modules import each other, directly or round a circle;
- no room imports another room's ``_private`` name.

Each rule is also run on a small made-up package holding one violation, to show it is caught."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpuscope"
# room -> the gpuscope rooms it may import (itself always). Bottom up.
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "torch": set(),
    "format": {"model"},
    "console": {"format"},
    "net": {"model"},
    "traces": {"model", "net"},
    "store": {"model"},
    "pricing": {"model"},
    "specs": {"model", "pricing"},
    "collectors": {"model", "net", "store"},
    "analyzers": {"model"},
    "figures": {"model", "format", "analyzers"},
    "reports": {"model", "format", "console", "analyzers", "figures"},
    "gate": {"model", "format", "console", "analyzers", "reports"},
    "changes": {"model", "analyzers", "gate"},
    "api": {"model", "format", "net", "traces", "store", "pricing", "specs", "collectors", "analyzers", "figures",
            "reports", "torch", "changes", "gate"},
    "fleet": {"model", "format", "console", "net", "store", "pricing", "specs", "collectors", "analyzers", "api"},
    "dashboards": {"model", "format", "store", "pricing", "specs", "analyzers", "figures", "reports", "changes",
                   "fleet"},
    "cli": {"model", "torch", "format", "console", "net", "traces", "store", "pricing", "specs", "collectors",
            "analyzers",
            "figures", "reports", "gate", "changes", "api", "fleet", "dashboards"},
}
# The package's own two files: ``gpuscope/__init__.py`` hands the API on (imported on first use), ``__main__`` runs
# the command line.
ENTRY_POINTS: dict[str, set[str]] = {"__init__": {"api"}, "__main__": {"cli"}}
# Third-party modules a room must not import at run time (they belong to collectors or views).
FORBIDDEN: dict[str, set[str]] = {
    "model": {"psutil", "pynvml", "dash", "plotly", "pandas"},
    "analyzers": {"psutil", "pynvml", "dash", "plotly"},
    "traces": {"psutil", "pynvml", "dash", "plotly", "pandas"},
}


@dataclass(frozen=True)
class Import:
    """One run-time import in a module of the package: the module it loads, and the name it takes (None for
    ``import x`` or where the name is itself a module)."""

    module: str
    name: str | None
    line: int


@dataclass(frozen=True)
class Package:
    """A package's modules, read from its folder: dotted name -> file."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @cached_property
    def modules(self) -> dict[str, Path]:
        found = {}
        for path in sorted(self.root.rglob("*.py")):
            parts = [self.name, *path.relative_to(self.root).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)] = path
        return found

    def room(self, module: str) -> str:
        """The room a module is in: its subpackage, or the module at the top (``__init__`` for the package)."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "__init__"

    def imports(self, module: str) -> Iterator[Import]:
        """The package's modules ``module`` imports at run time."""
        path = self.modules[module]
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                yield from (Import(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == self.name)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:  # relative: ``from . import x``, ``from ..model import y``
                    source = ".".join([*base[:len(base) - node.level + 1], *([source] if source else [])])
                if source.split(".")[0] != self.name:
                    continue
                for alias in node.names:
                    inner = f"{source}.{alias.name}"  # ``from gpuscope import figures`` imports a module
                    in_module = inner not in self.modules
                    yield Import(source if in_module else inner, alias.name if in_module else None, node.lineno)


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of the tree but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.orelse:
                yield stmt
                yield from runtime_nodes(stmt)
            continue
        yield node
        yield from runtime_nodes(node)


def room_of_import(package: Package, imp: Import) -> str:
    """The room an import loads. ``from gpuscope import analyze``: a name the package's ``__init__`` hands on from
    the API, so the API's room; ``from gpuscope import __version__``: the package itself, which every room may."""
    if imp.module == package.name:
        return "" if imp.name is None or imp.name.startswith("__") else "api"
    return package.room(imp.module)


def upward_imports(package: Package, allowed: Mapping[str, set[str]]) -> list[str]:
    """Each import of a room not allowed to its importer, as "file:line: room imports room (module)"."""
    found = []
    for module, path in package.modules.items():
        room = package.room(module)
        for imp in package.imports(module):
            target = room_of_import(package, imp)
            if target and target != room and target not in allowed.get(room, set()):
                found.append(f"{path.relative_to(package.root.parent)}:{imp.line}: {room} imports {target} "
                             f"({imp.module})")
    return found


def rooms(package: Package) -> set[str]:
    return {package.room(m) for m in package.modules}


def rooms_without_rules(package: Package, allowed: Mapping[str, set[str]]) -> set[str]:
    return rooms(package) - allowed.keys()


def circles(package: Package) -> list[list[str]]:
    """The package's circles of imports between modules, each as its modules (strongly connected components of
    more than one module, or a module importing itself), found with Tarjan's algorithm."""
    modules = package.modules
    graph = {m: sorted({i.module for i in package.imports(m) if i.module in modules}) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def private_imports(package: Package) -> list[str]:
    """Each ``_private`` name (or module) one room takes from another: "file:line: module imports name"."""
    found = []
    for module, path in package.modules.items():
        for imp in package.imports(module):
            parts = [*imp.module.split(".")[1:], *([imp.name] if imp.name else [])]
            private = [p for p in parts if p.startswith("_") and not p.startswith("__")]
            if private and package.room(imp.module) != package.room(module):
                found.append(f"{path.relative_to(package.root.parent)}:{imp.line}: {module} imports "
                             f"{imp.module}{'.' + imp.name if imp.name else ''}")
    return found


GPUSCOPE = Package(PACKAGE)


def test_every_room_has_its_rule() -> None:
    assert rooms_without_rules(GPUSCOPE, {**ALLOWED, **ENTRY_POINTS}) == set()
    assert set(ALLOWED) <= rooms(GPUSCOPE), "a rule for a room that is gone"
    assert set().union(*ALLOWED.values(), *ENTRY_POINTS.values()) <= set(ALLOWED)


def test_each_room_imports_only_the_rooms_below_it() -> None:
    assert upward_imports(GPUSCOPE, {**ALLOWED, **ENTRY_POINTS}) == []


def test_the_rooms_stand_in_layers() -> None:
    """ALLOWED itself has no circle: the rooms can be put on floors, each importing only floors under it."""
    left = dict(ALLOWED)
    while left:
        ground = {room for room, below in left.items() if not below & left.keys() - {room}}
        assert ground, f"the rules go round: {sorted(left)}"
        left = {room: below for room, below in left.items() if room not in ground}


def test_no_module_imports_itself_round_a_circle() -> None:
    assert circles(GPUSCOPE) == []


def test_no_room_imports_anothers_private_names() -> None:
    assert private_imports(GPUSCOPE) == []


def third_party(path: Path) -> set[str]:
    """The top-level names of the modules outside gpuscope a file imports at run time."""
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found - {PACKAGE.name}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_room_imports_its_forbidden_packages(layer: str) -> None:
    third = set().union(*(third_party(f) for f in (PACKAGE / layer).rglob("*.py")))
    assert not third & FORBIDDEN[layer], f"{layer} imports {sorted(third & FORBIDDEN[layer])}"


def test_the_rule_reads_real_imports() -> None:
    targets = {room_of_import(GPUSCOPE, i) for m in GPUSCOPE.modules if GPUSCOPE.room(m) == "collectors"
               for i in GPUSCOPE.imports(m)}
    assert {"store", "model"} <= targets  # the scan sees what is there
    html = {i.module for i in GPUSCOPE.imports("gpuscope.reports.html")}
    assert "gpuscope.figures" in html  # ``from gpuscope import figures`` is an import of gpuscope.figures
    assert "gpuscope.reports.html_details" in html  # ``from gpuscope.reports import html_details as details``


# A made-up package "shop": model at the bottom, views over it. Each test below adds one violation to it.
SHOP = {
    "__init__.py": "",
    "model/__init__.py": "",
    "model/item.py": "from dataclasses import dataclass\n\n@dataclass\nclass Item:\n    name: str\n",
    "model/price.py": """
        from typing import TYPE_CHECKING
        from shop.model.item import Item
        if TYPE_CHECKING:
            from shop.views.page import page  # for types only: not a run-time import
        def _cents(item: Item) -> int:
            return 100
        def price(item: Item) -> int:
            return _cents(item)
        """,
    "views/__init__.py": "",
    "views/page.py": "from shop.model import price\nfrom shop.model.item import Item\n\ndef page(i: Item) -> str:\n"
                     "    return str(price.price(i))\n",
}
SHOP_ALLOWED = {"model": set(), "views": {"model"}}


def shop(tmp_path: Path, **changes: str) -> Package:
    for name, text in {**SHOP, **changes}.items():
        path = tmp_path / "shop" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return Package(tmp_path / "shop")


def test_the_made_up_package_keeps_every_rule(tmp_path: Path) -> None:
    package = shop(tmp_path)
    assert rooms_without_rules(package, {**SHOP_ALLOWED, "__init__": set()}) == set()
    assert upward_imports(package, SHOP_ALLOWED) == []
    assert circles(package) == []
    assert private_imports(package) == []


def test_an_import_up_a_floor_is_caught(tmp_path: Path) -> None:
    package = shop(tmp_path, **{"model/item.py": SHOP["model/item.py"] + "\ndef show():\n"
                                                  "    from shop.views.page import page\n    return page\n"})
    assert upward_imports(package, SHOP_ALLOWED) == ["shop/model/item.py:8: model imports views (shop.views.page)"]


def test_a_room_without_a_rule_is_caught(tmp_path: Path) -> None:
    package = shop(tmp_path, **{"store/__init__.py": "from shop.model.item import Item\n"})
    assert rooms_without_rules(package, {**SHOP_ALLOWED, "__init__": set()}) == {"store"}
    assert upward_imports(package, SHOP_ALLOWED) == ["shop/store/__init__.py:1: store imports model (shop.model.item)"]


def test_a_circle_is_caught_even_through_an_import_inside_a_function(tmp_path: Path) -> None:
    lazy = SHOP["model/item.py"] + "\ndef total():\n    from shop.model.price import price\n    return price\n"
    package = shop(tmp_path, **{"model/item.py": lazy})
    assert circles(package) == [["shop.model.item", "shop.model.price"]]
    relative = "from . import price\n"  # a relative import counts as well
    assert circles(shop(tmp_path / "r", **{"model/item.py": relative + SHOP["model/item.py"]})) == [
        ["shop.model.item", "shop.model.price"]]


def test_a_private_name_from_another_room_is_caught(tmp_path: Path) -> None:
    peek = "from shop.model.price import _cents\n"
    package = shop(tmp_path, **{"views/page.py": peek + SHOP["views/page.py"]})
    assert private_imports(package) == ["shop/views/page.py:1: shop.views.page imports shop.model.price._cents"]
    inside = "from shop.model.price import _cents\n"  # within its own room a private name is the room's business
    assert private_imports(shop(tmp_path / "own", **{"model/other.py": inside})) == []
