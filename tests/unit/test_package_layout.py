"""The sub-packages show the architecture, and each one is entered only by its ``__all__``.

A store, the ASGI adapter or the observability endpoints may use the shared top-level
modules and another sub-package's public names, never another sub-package's private
modules: otherwise the grouping says nothing true about what depends on what. And no
module of either package in ``src/``, the scheduler's or the client's, grows past
:data:`MAX_MODULE_LINES`: a module that long holds more than one thing, and is split by
purpose instead.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import arkvory_client
import arkvory_sched

PACKAGE_ROOT = Path(arkvory_sched.__file__).parent
CLIENT_ROOT = Path(arkvory_client.__file__).parent
SUB_PACKAGES = (
    "api",
    "asgi",
    "console",
    "demo",
    "measures",
    "memory",
    "observability",
    "policy",
    "portal",
    "postgres",
    "settings",
    "sqlite",
    "testing",
)
MAX_MODULE_LINES = 500


def _package_of(module: str) -> str:
    """``arkvory_sched.memory._core`` -> ``memory``; a top-level module -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SUB_PACKAGES else ""


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every ``from X import a, b`` of one file, with X made absolute."""
    relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    here = list(relative.parts[:-1])  # the package the file is in
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
    return found


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE_ROOT.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE_ROOT)))
def test_no_module_imports_another_packages_private_names(path: Path) -> None:
    own = _package_of(".".join(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts))
    for module, names in _imports(path):
        if not module.startswith("arkvory_sched."):
            continue
        target = _package_of(module)
        if not target or target == own:
            continue
        assert module == f"arkvory_sched.{target}", f"{module} is private to {target}/"
        assert not [name for name in names if name.startswith("_")], (module, names)


@pytest.mark.parametrize(
    "name",
    ["api", "asgi", "console", "measures", "memory", "observability", "settings", "testing"],
)
def test_each_new_sub_package_exports_exactly_its_all(name: str) -> None:
    package = importlib.import_module(f"arkvory_sched.{name}")
    assert package.__doc__, "the docstring says what the package is and why it is apart"
    for exported in package.__all__:
        assert hasattr(package, exported), exported
    public = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_") and not getattr(value, "__name__", "").startswith("arkvory_")
    }
    assert public - {"annotations"} == set(package.__all__)


def test_the_flat_modules_left_at_the_top_are_the_shared_ones() -> None:
    """What moved into a sub-package does not come back to the top level by accident."""
    top = {p.stem for p in PACKAGE_ROOT.glob("_*.py")} - {"__init__"}
    for moved in ("_core", "_memory", "_middleware", "_metrics", "_readiness", "_ranges"):
        assert moved not in top


def _all_modules() -> list[Path]:
    """Every Python module of both packages in ``src/``."""
    return sorted(path for root in (PACKAGE_ROOT, CLIENT_ROOT) for path in root.rglob("*.py"))


def test_the_size_check_sees_both_packages() -> None:
    names = {path.relative_to(PACKAGE_ROOT.parent).parts[0] for path in _all_modules()}
    assert names == {"arkvory_sched", "arkvory_client"}


@pytest.mark.parametrize(
    "path", _all_modules(), ids=lambda p: str(p.relative_to(PACKAGE_ROOT.parent))
)
def test_no_module_is_over_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name} has {lines} lines; split it by purpose"
