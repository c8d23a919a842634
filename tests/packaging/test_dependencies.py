"""Each side imports only what its install brings (ADR 0026).

An install without extras brings the client's dependencies, the ``server`` extra the
server's. An import the lists do not cover works in the development environment, which
has everything, and fails on a user's machine; these checks read the sources instead of
waiting for that. The installed-wheel test (``test_installed_wheel.py``) proves the same
for real, more slowly.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import _arkvory_launch

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _name(requirement: str) -> str:
    """``prometheus-client>=0.20`` -> ``prometheus-client`` (PEP 503 normalised)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match[0]).lower()


def _modules_of(requirements: list[str]) -> set[str]:
    """The top-level modules the named distributions install, as installed here."""
    wanted = {_name(requirement) for requirement in requirements}
    return {
        module
        for module, distributions in packages_distributions().items()
        if wanted & {_name(distribution) for distribution in distributions}
    }


CLIENT_MODULES = _modules_of(PROJECT["dependencies"])
SERVER_EXTRA = PROJECT["optional-dependencies"]["server"]
TESTING_EXTRA = PROJECT["optional-dependencies"]["testing"]
# The shipped checker's plugin and rule modules run under pytest, which only the testing
# extra brings (ADR 0031); the rest of arkvory_sched.testing imports no more than the server.
CHECKER = ("arkvory_sched/testing/plugin.py", "arkvory_sched/testing/contract/")


def _type_checking_only(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imported(nodes: Iterable[ast.AST]) -> Iterator[str]:
    """The top-level module of every absolute import that runs (not TYPE_CHECKING ones)."""
    for node in nodes:
        if isinstance(node, ast.If) and _type_checking_only(node):
            yield from _imported(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module.partition(".")[0]
        yield from _imported(ast.iter_child_nodes(node))


def _third_party(package: Path) -> dict[str, set[str]]:
    """Third-party top-level module -> the files of ``package`` importing it."""
    files = sorted(package.rglob("*.py")) if package.is_dir() else [package]
    found: dict[str, set[str]] = {}
    for path in files:
        for module in _imported([ast.parse(path.read_text(encoding="utf-8"))]):
            if module not in sys.stdlib_module_names and module != "__future__":
                found.setdefault(module, set()).add(str(path.relative_to(SRC)))
    return found


def test_the_server_extra_installs_the_modules_the_launcher_recognises() -> None:
    # The launcher turns a missing module of this set into "install the server extra";
    # one the extra brings but the set lacks would end in a traceback instead.
    assert _modules_of(SERVER_EXTRA) == _arkvory_launch.SERVER_MODULES


def test_the_client_and_server_lists_do_not_overlap() -> None:
    # A server dependency left in the base list makes every client install heavy again.
    assert not {_name(r) for r in PROJECT["dependencies"]} & {_name(r) for r in SERVER_EXTRA}


def test_the_client_imports_only_its_own_dependencies() -> None:
    imported = _third_party(SRC / "arkvory_client")
    assert "arkvory_sched" not in imported, imported.get("arkvory_sched")
    assert set(imported) - {"arkvory_client"} <= CLIENT_MODULES, {
        module: files for module, files in imported.items() if module not in CLIENT_MODULES
    }
    # The check sees real imports: the client's HTTP library is among them.
    assert {"httpx", "anyio", "rich"} <= set(imported)


def _split_checker(found: dict[str, set[str]]) -> tuple[dict[str, set[str]], set[str]]:
    """The imports of files outside the checker, and the modules the checker imports."""
    outside: dict[str, set[str]] = {}
    checker: set[str] = set()
    for module, files in found.items():
        if rest := {path for path in files if not path.startswith(CHECKER)}:
            outside[module] = rest
        if rest != files:
            checker.add(module)
    return outside, checker


def test_the_server_imports_only_the_client_and_server_dependencies() -> None:
    imported, _ = _split_checker(_third_party(SRC / "arkvory_sched"))
    allowed = CLIENT_MODULES | _arkvory_launch.SERVER_MODULES | {"arkvory_sched"}
    assert set(imported) <= allowed, {
        module: files for module, files in imported.items() if module not in allowed
    }
    assert {"starlette", "asyncpg", "uvicorn"} <= set(imported)


def test_the_checker_imports_only_what_the_testing_extra_brings() -> None:
    _, imported = _split_checker(_third_party(SRC / "arkvory_sched"))
    allowed = CLIENT_MODULES | _arkvory_launch.SERVER_MODULES | _modules_of(TESTING_EXTRA)
    assert imported <= allowed | {"arkvory_sched"}, imported - allowed
    assert "pytest" in imported


def test_importing_the_library_or_its_clock_does_not_import_pytest() -> None:
    code = (
        "import sys, arkvory_sched, arkvory_sched.testing; "
        "assert 'pytest' not in sys.modules and '_pytest' not in sys.modules, "
        "sorted(m for m in sys.modules if 'pytest' in m)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", ["_arkvory_launch.py", "arkvory_client/_version.py"])
def test_the_launcher_and_the_version_need_nothing_installed(module: str) -> None:
    # The launcher must start when the server's packages are missing; it imports
    # arkvory_sched only inside the try that reports them.
    assert set(_third_party(SRC / module)) <= {"arkvory_sched"}
