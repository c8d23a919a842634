"""The house's shape, read from the source: no import cycle, the policy on the ground
floor, no module taking another module's private name (issue #27, ADR 0001).

Imports are read with :mod:`ast`, function-level imports included (a cycle kept alive
by deferring an import is still a cycle); imports under ``if TYPE_CHECKING:`` are
skipped, since they never run. An edge goes to the module named, not to its parent
packages: ``from ..policy import x`` is an edge to ``arkvory_sched.policy``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("arkvory_sched", "arkvory_client")

#: What the policy may stand on: plain values and errors, nothing that keeps state.
GROUND = frozenset(
    {
        "arkvory_sched._classes",
        "arkvory_sched._exceptions",
        "arkvory_sched._model",
        "arkvory_sched._session_keys",
    }
)
POLICY = "arkvory_sched.policy"
#: The rooms that decide and keep the queue, and the rooms that serve it to people and
#: tools: the first never import the second (a store pulls in no web framework).
STORES = ("policy", "settings", "measures", "memory", "postgres", "sqlite")
SERVING = ("asgi", "api", "console", "portal", "observability", "demo")


@dataclass(frozen=True)
class Import:
    """One import statement of a module, resolved to the module it names."""

    source: str
    target: str
    names: tuple[str, ...]
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((SOURCE / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import under ``node`` that runs, skipping ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _statements(other)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _statements(child)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports_of(module: str) -> Iterator[Import]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield Import(module, alias.name, (), node.lineno)
            continue
        target = _resolve(module, is_package, node)
        if target not in MODULES:
            continue
        plain: list[str] = []
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            if submodule in MODULES:  # ``from . import _sql``: the submodule itself
                yield Import(module, submodule, (), node.lineno)
            else:
                plain.append(alias.name)
        if plain:
            yield Import(module, target, tuple(plain), node.lineno)


IMPORTS = [found for module in MODULES for found in _imports_of(module)]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or with a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_reader_sees_the_imports_it_is_meant_to_see() -> None:
    """The graph's own check: known edges are there, a TYPE_CHECKING one is not."""
    edges = {(found.source, found.target) for found in IMPORTS}
    assert ("arkvory_sched.policy._gate", "arkvory_sched.policy._windows") in edges
    assert ("arkvory_sched.memory", "arkvory_sched.memory._memory") in edges
    assert len(MODULES) > 100


def test_no_module_imports_itself_back_through_others() -> None:
    edges: dict[str, set[str]] = {}
    for found in IMPORTS:
        edges.setdefault(found.source, set()).add(found.target)
    assert _cycles(edges) == []


def test_the_policy_stands_on_the_ground_floor_only() -> None:
    """The policy imports plain values and itself, and the ground floor only itself."""
    upward = [
        f"{found.source}:{found.line} imports {found.target}"
        for found in IMPORTS
        if (found.source == POLICY or found.source.startswith(POLICY + "."))
        and not (found.target == POLICY or found.target.startswith(POLICY + "."))
        and found.target not in GROUND
    ]
    upward += [
        f"{found.source}:{found.line} imports {found.target}"
        for found in IMPORTS
        if found.source in GROUND and found.target not in GROUND
    ]
    assert upward == []


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(
        module == f"arkvory_sched.{name}" or module.startswith(f"arkvory_sched.{name}.")
        for name in packages
    )


def test_no_store_imports_what_serves_it() -> None:
    upward = [
        f"{found.source}:{found.line} imports {found.target}"
        for found in IMPORTS
        if _in(found.source, STORES)
        and (_in(found.target, SERVING) or found.target == "arkvory_sched")
    ]
    assert upward == []


def test_no_module_takes_another_modules_private_name() -> None:
    """A name with a leading underscore belongs to its module: another module that needs
    it needs a public name or the code moved."""
    taken = [
        f"{found.source}:{found.line} takes {name} from {found.target}"
        for found in IMPORTS
        if found.target != found.source
        for name in found.names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert taken == []
