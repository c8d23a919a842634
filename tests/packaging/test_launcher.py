"""``--version`` of the three commands, and the server commands on a client-only install.

The launcher (``_arkvory_launch``) is what the ``arkvory-demo`` and ``arkvory-sched``
scripts call. Here it runs in the development environment; a server dependency is made
to go missing in a child process by a ``None`` in ``sys.modules``, which makes its
import fail exactly as an absent package does. The installed-wheel test repeats this
with the packages really absent.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

import pytest

import _arkvory_launch
import arkvory_client._version
import arkvory_sched._version
from arkvory_client._cli import main as arkvoryctl

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
LAUNCHERS: dict[str, Callable[[], int]] = {
    "arkvory-demo": _arkvory_launch.demo,
    "arkvory-sched": _arkvory_launch.sched,
}


def test_the_scripts_point_at_the_launcher_and_the_client() -> None:
    assert SCRIPTS == {
        "arkvory-demo": "_arkvory_launch:demo",
        "arkvory-sched": "_arkvory_launch:sched",
        "arkvoryctl": "arkvory_client._cli:main",
    }


def test_arkvoryctl_version_is_the_installed_distributions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert arkvoryctl(["--version"]) == 0
    assert capsys.readouterr().out == f"arkvoryctl {version('arkvory-sched')}\n"


@pytest.mark.parametrize("prog", sorted(LAUNCHERS))
def test_server_command_version_through_the_launcher(
    prog: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [prog, "--version"])
    try:
        code = LAUNCHERS[prog]()
    except SystemExit as stop:  # argparse's version action exits; demo's main returns
        code = stop.code if isinstance(stop.code, int) else -1
    assert code == 0
    assert capsys.readouterr().out == f"{prog} {version('arkvory-sched')}\n"


@pytest.mark.parametrize("module", [arkvory_client._version, arkvory_sched._version])
def test_a_source_tree_never_installed_says_so(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    assert module.installed_version() == version("arkvory-sched")
    monkeypatch.setattr(module, "version", not_installed)
    assert module.installed_version() == "unknown (not installed)"


@pytest.mark.parametrize(("entry", "missing"), [("demo", "uvicorn"), ("sched", "asyncpg")])
def test_a_missing_server_package_is_one_line_and_exit_2(entry: str, missing: str) -> None:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.modules[{missing!r}] = None; import _arkvory_launch; "
            f"sys.argv = ['x', '--help']; sys.exit(_arkvory_launch.{entry}())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (child.returncode, child.stdout) == (2, "")
    assert child.stderr.splitlines() == [
        f"arkvory-{entry}: the server is not installed (no module {missing!r}); "
        "install it with: pip install 'arkvory-sched[server]'"
    ]


def test_any_other_missing_module_keeps_its_traceback() -> None:
    # A module that no extra installs is a bug or a broken install: the install hint
    # would send the user the wrong way.
    error = ModuleNotFoundError("No module named 'arkvory_sched.gone'", name="arkvory_sched.gone")
    with pytest.raises(ModuleNotFoundError) as raised:
        _arkvory_launch.missing_server("arkvory-demo", error, sys.stderr)
    assert raised.value is error
