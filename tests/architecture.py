"""docs/architecture.md, read against the code: the part between its markers is generated from gpuscope/ (what each
package holds, from its docstring; what it imports at run time; what tests/test_layers.py allows it), and every
module, function and arrow its hand-written flows name is looked up in the code.

    PYTHONPATH=. python -m tests.test_architecture     # rewrite the generated part
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpuscope"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- generated: layers -->", "<!-- end -->"
REGENERATE = "PYTHONPATH=. python -m tests.test_architecture"
NOT_RULED = "not ruled"
NAME = re.compile(r"`(gpuscope(?:/\w+)+(?:\.py|/)|gpuscope(?:\.[A-Za-z_]\w*)+)`")
"""A module or function a flow names: `gpuscope/api/analysis.py`, `gpuscope/traces/`, `gpuscope.api.load`."""
COMMAND = re.compile(r"`gpuscope ([a-z][a-z-]*)\b[^`]*`")
MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)
NODE = re.compile(r'([A-Za-z_]\w*)(?:\["([^"]*)"\]|\[([^\]]*)\])?')
EDGE = re.compile(r"\s*(?:-->|-\.->|==>)(?:\|[^|]*\|)?\s*")


# --- the packages and their imports -----------------------------------------------------------------------------

def packages() -> list[str]:
    """gpuscope's packages as tests/test_layers.py names them: each folder with Python in it, and each top-level
    module but the package's own ``__init__`` and ``__main__``."""
    folders = [p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.rglob("*.py"))]
    modules = [p.stem for p in PACKAGE.glob("*.py") if p.stem not in {"__init__", "__main__"}]
    return sorted(folders + modules)


def package_files(name: str) -> list[Path]:
    single = PACKAGE / f"{name}.py"
    return [single] if single.exists() else sorted((PACKAGE / name).rglob("*.py"))


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@cache
def _file_bindings(path: Path) -> dict[str, str]:
    return _bindings(_parse(path))


@cache
def runtime_imports(path: Path) -> frozenset[str]:
    """Every dotted name a file imports when it runs (``from a.b import c`` gives ``a.b`` and ``a.b.c``); imports
    inside functions count, ``if TYPE_CHECKING:`` blocks do not."""
    tree = _parse(path)
    modules = {n.module for n in _runtime_nodes(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return frozenset(_file_bindings(path).values()) | modules


def _runtime_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """The import statements of a file that run: those in an ``if TYPE_CHECKING:`` block are left out."""
    skipped: set[int] = set()
    imports: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(node)
    return (n for n in imports if id(n) not in skipped)


def _bindings(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it was imported as, for a file's run-time imports."""
    bound: dict[str, str] = {}
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bound |= {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            bound |= {(a.asname or a.name.split(".")[0]): a.name for a in node.names}
    return bound


def package_imports(name: str) -> set[str]:
    """The other gpuscope packages ``name`` imports at run time."""
    ours = set(packages())
    found: set[str] = set()
    for path in package_files(name):
        for dotted in runtime_imports(path):
            parts = dotted.split(".")
            if parts[0] == "gpuscope" and len(parts) > 1 and parts[1] in ours:
                found.add(parts[1])
    return found - {name}


def third_party(name: str) -> set[str]:
    """The top-level third-party modules ``name`` imports at run time (anywhere in it, first use included)."""
    tops = {d.split(".")[0] for path in package_files(name) for d in runtime_imports(path)}
    return {t for t in tops if t != "gpuscope" and t not in sys.stdlib_module_names and t != "__future__"}


def summary(name: str) -> str | None:
    """The first sentence of the package's docstring (its ``__init__.py``, or the module's own)."""
    files = package_files(name)
    init = PACKAGE / name / "__init__.py"
    source = init if init in files else (files[0] if len(files) == 1 else None)
    doc = ast.get_docstring(_parse(source)) if source is not None else None
    if not doc:
        return None
    first = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`])", first)[0]


# --- the generated part -----------------------------------------------------------------------------------------

def _depths(graph: Mapping[str, set[str]]) -> dict[str, int]:
    """How many layers sit under each package: 0 for one that imports none of the others."""
    depth: dict[str, int] = {}

    def of(name: str, seen: frozenset[str]) -> int:
        if name not in depth:
            below = [of(d, seen | {name}) for d in graph[name] if d not in seen]
            depth[name] = 1 + max(below) if below else 0
        return depth[name]

    for name in graph:
        of(name, frozenset())
    return depth


def _reach(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph[node]
    return seen


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of packages that import each other, round a cycle."""
    reach = {name: _reach(graph, name) for name in graph}
    groups = {frozenset({a} | {b for b in reach[a] if a in reach[b]}) for a in graph if a in reach[a]}
    return sorted(sorted(g) for g in groups)


def _reduced(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The arrows worth drawing: an import is left out when another path already leads there through a package
    outside both ends' cycles (a transitive reduction of the graph of cycles); arrows round a cycle all stay."""
    reach = {name: _reach(graph, name) for name in graph}
    group = {a: frozenset({a} | {b for b in reach[a] if a in reach[b]}) for a in graph}

    def implied(a: str, b: str) -> bool:
        return any(b in reach[c] for m in group[a] for c in graph[m] if group[c] not in (group[a], group[b]))

    return {a: {b for b in bs if group[a] == group[b] or not implied(a, b)} for a, bs in graph.items()}


def _rule(name: str, allowed: Mapping[str, set[str] | None]) -> str:
    if name not in allowed:
        return NOT_RULED
    rule = allowed[name]
    if rule is None:
        return "anything"
    return ", ".join(sorted(rule)) or "nothing"


def _imports_cell(name: str, imports: set[str], allowed: Mapping[str, set[str] | None]) -> str:
    rule = allowed.get(name, set())
    marked = [f"**{i} (breaks the rule)**" if name in allowed and rule is not None and i not in rule else i
              for i in sorted(imports)]
    return ", ".join(marked) or "none"


def generated(allowed: Mapping[str, set[str] | None]) -> str:
    """The text between the markers: a Mermaid graph of the imports between packages, then a table of them."""
    graph = {name: package_imports(name) for name in packages()}
    depth = _depths(graph)
    order = sorted(graph, key=lambda n: (-depth[n], n))
    lines = ["", "```mermaid", "flowchart TD"]
    lines += [f'  {name}["{name}"]' for name in order]
    for a in order:
        for b in sorted(_reduced(graph)[a], key=lambda n: (-depth[n], n)):
            unruled = a not in allowed
            lines.append(f"  {a} {'-.->' if unruled else '-->'} {b}")
    lines += ["```", ""]
    lines += [f"Packages that import each other, round a cycle: {', '.join(group)}." for group in cycles(graph)]
    lines += ["", "| package | what it holds | imports (run time) | may import (`ALLOWED`) | third-party (run time) |",
              "|---|---|---|---|---|"]
    for name in sorted(graph, key=lambda n: (depth[n], n)):
        kind = f"`gpuscope/{name}.py`" if (PACKAGE / f"{name}.py").exists() else f"`gpuscope/{name}/`"
        held = (summary(name) or "(no docstring)").replace("|", "\\|")
        lines.append(f"| {kind} | {held} | {_imports_cell(name, graph[name], allowed)} | {_rule(name, allowed)} | "
                     f"{', '.join(sorted(third_party(name))) or 'none'} |")
    return "\n".join([*lines, ""])


def generated_part(doc: str) -> str | None:
    """What the document holds between its markers, or None without them."""
    if BEGIN not in doc or END not in doc.split(BEGIN, 1)[1]:
        return None
    return doc.split(BEGIN, 1)[1].split(END, 1)[0]


def with_generated(doc: str, part: str) -> str:
    head, rest = doc.split(BEGIN, 1)
    return head + BEGIN + part + END + rest.split(END, 1)[1]


# --- the hand-written flows -------------------------------------------------------------------------------------

@cache
def resolve(name: str) -> tuple[ModuleType, tuple[str, ...]] | None:
    """The module a dotted or path name lives in and the attributes after it, or None when it does not exist."""
    if "/" in name:
        path = ROOT / name
        if not path.exists() or name.endswith("/") != path.is_dir():
            return None
        name = name.removesuffix("/").removesuffix(".py").replace("/", ".")
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        tried = ".".join(parts[:cut])
        try:
            module = importlib.import_module(tried)
        except ModuleNotFoundError as exc:
            if exc.name is None or not tried.startswith(exc.name):
                raise  # the module is there and lacks a dependency: not a name missing from the code
            continue
        obj: object = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
        return module, tuple(parts[cut:])
    return None


def _target(name: str) -> object:
    module, attrs = resolve(name) or (None, ())
    obj: object = module
    for attr in attrs:
        obj = getattr(obj, attr)
    return obj


def _module_bindings(module: ModuleType) -> dict[str, str]:
    """Local name -> imported dotted name, over the module's file (every file of a package)."""
    file = Path(module.__file__ or "")
    files = sorted(file.parent.rglob("*.py")) if file.name == "__init__.py" else [file]
    bound: dict[str, str] = {}
    for path in files:
        bound |= _file_bindings(path)
    return bound


def _mentions(function: object, module: ModuleType, seen: set[str] | None = None) -> set[str]:
    """The names a function's body uses, and those of the functions of its own module it calls (a call path)."""
    seen = set() if seen is None else seen
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for local in sorted(names - seen):
        helper = getattr(module, local, None)
        if inspect.isfunction(helper) and helper.__module__ == module.__name__:
            seen.add(local)
            names |= _mentions(helper, module, seen)
    return names


def _named_by(dotted: str) -> object:
    return _target(dotted) if dotted.startswith("gpuscope.") and resolve(dotted) is not None else None


def arrow_problem(a: str, b: str) -> str | None:
    """Why the arrow a --> b is not a real link, or None when it is. a's module must import b (b's module, something
    in it, or b itself where a package re-exports it), unless b is a method, which is called on an object a got
    from elsewhere; and where a is a function, its body (or a function of its own module it calls) must use b's
    name, or a name imported from b."""
    found_a, found_b = resolve(a), resolve(b)
    if found_a is None or found_b is None:
        return None  # reported as a name missing from the code
    target_a, (mod_b, attrs_b) = _target(a), found_b
    home_a = sys.modules[getattr(target_a, "__module__", "")] if inspect.isfunction(target_a) else found_a[0]
    homes = {mod_b.__name__} | ({getattr(_target(b), "__module__", None) or mod_b.__name__} if attrs_b else set())
    owners = [_target(".".join([mod_b.__name__, *attrs_b[:i]])) for i in range(1, len(attrs_b) + 1)]
    links = {local for local, dotted in _module_bindings(home_a).items()
             if any(dotted == h or dotted.startswith(h + ".") for h in homes)
             or any(_named_by(dotted) is o for o in owners)}
    method = len(attrs_b) > 1 and inspect.isclass(owners[-2])
    if home_a.__name__ not in homes and not links and not method:
        return f"{a} --> {b}: {home_a.__name__} does not import {mod_b.__name__}"
    if not inspect.isfunction(target_a):
        return None  # a module, package or class: the import is the link
    wanted = {attrs_b[-1]} if attrs_b else links
    if not _mentions(target_a, home_a) & wanted:
        return f"{a} --> {b}: {a} does not call or use {b}"
    return None


def mermaid_arrows(doc: str) -> list[tuple[str, str]]:
    """The arrows of every Mermaid diagram outside the generated part, as (label, label) pairs."""
    part = generated_part(doc)
    text = doc.replace(part, "") if part else doc
    arrows: list[tuple[str, str]] = []
    for block in MERMAID.findall(text):
        labels: dict[str, str] = {}
        pairs: list[tuple[str, str]] = []
        for line in block.splitlines():
            nodes = EDGE.split(line.strip())
            ids = []
            for node in nodes:
                match = NODE.fullmatch(node.strip())
                if match is None:
                    break
                ident, label = match.group(1), match.group(2) or match.group(3)
                labels[ident] = label if label is not None else labels.get(ident, ident)
                ids.append(ident)
            else:
                pairs += list(zip(ids, ids[1:]))
        arrows += [(labels.get(x, x), labels.get(y, y)) for x, y in pairs]
    return arrows


def named(doc: str) -> set[str]:
    """Every module or function the hand-written part names in backticks or as a diagram's node."""
    part = generated_part(doc)
    text = doc.replace(part, "") if part else doc
    found = set(NAME.findall(text))
    found |= {label for arrow in mermaid_arrows(doc) for label in arrow if NAME.fullmatch(f"`{label}`")}
    return found


def problems(doc: str, allowed: Mapping[str, set[str] | None]) -> list[str]:
    """Everything in the document the code does not bear out; empty when it all holds."""
    part = generated_part(doc)
    if part is None:
        return [f"docs/architecture.md has no {BEGIN} ... {END} part: add the markers and run `{REGENERATE}`"]
    found = []
    if part != generated(allowed):
        found.append(f"the generated part of docs/architecture.md is stale: run `{REGENERATE}`")
    found += [f"{name} does not exist in the code" for name in sorted(named(doc)) if resolve(name) is None]
    commands = set(importlib.import_module("gpuscope.cli.main").COMMANDS)
    found += [f"`gpuscope {c}` is not a command" for c in sorted(set(COMMAND.findall(doc)) - commands)]
    for a, b in mermaid_arrows(doc):
        if NAME.fullmatch(f"`{a}`") and NAME.fullmatch(f"`{b}`"):
            why = arrow_problem(a, b)
            if why:
                found.append(why)
    return found
