"""``--version`` of the three commands, and the server commands on a client-only install.

The launcher (``_arkvory_launch``) is what the ``arkvory-demo`` and ``arkvory-sched``
scripts call. Here it runs in the development environment; a server dependency is made
to go missing in a child process by a ``None`` in ``sys.modules``, which makes its
import fail exactly as an absent package does. The installed-wheel test repeats this
with the packages really absent.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping
from importlib.metadata import Distribution, PackageNotFoundError, PathDistribution, version
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
        f"install it with: {_arkvory_launch.install_hint()}"
    ]
    # Never the index name: the package is on no index.
    assert "pip install 'arkvory-sched[server]'" not in child.stderr


def test_any_other_missing_module_keeps_its_traceback() -> None:
    # A module that no extra installs is a bug or a broken install: the install hint
    # would send the user the wrong way.
    error = ModuleNotFoundError("No module named 'arkvory_sched.gone'", name="arkvory_sched.gone")
    with pytest.raises(ModuleNotFoundError) as raised:
        _arkvory_launch.missing_server("arkvory-demo", error, sys.stderr)
    assert raised.value is error


# --- the hint names where this install came from (PEP 610's direct_url.json) --------------


def _installed(tmp_path: Path, direct_url: Mapping[str, object] | None) -> Distribution:
    """An installed ``arkvory-sched`` 1.2.3 whose pip record is ``direct_url``."""
    info = tmp_path / "arkvory_sched-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arkvory-sched\nVersion: 1.2.3\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return PathDistribution(info)


def test_the_hint_names_the_checkout_an_install_came_from(tmp_path: Path) -> None:
    checkout = tmp_path / "my checkout"
    checkout.mkdir()
    record = {"url": checkout.as_uri(), "dir_info": {}}
    hint = _arkvory_launch.install_hint(_installed(tmp_path, record))
    assert hint == f"pip install '{checkout}[server]'"
    assert shlex.split(hint) == ["pip", "install", f"{checkout}[server]"]


def test_the_hint_keeps_an_editable_install_editable(tmp_path: Path) -> None:
    record = {"url": tmp_path.as_uri(), "dir_info": {"editable": True}}
    hint = _arkvory_launch.install_hint(_installed(tmp_path, record))
    assert hint == f"pip install -e '{tmp_path}[server]'"


def test_the_hint_names_the_wheel_an_install_came_from(tmp_path: Path) -> None:
    wheel = tmp_path / "arkvory_sched-1.2.3-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    record = {"url": wheel.as_uri(), "archive_info": {"hashes": {}}}
    hint = _arkvory_launch.install_hint(_installed(tmp_path, record))
    assert hint == f"pip install '{wheel}[server]'"


@pytest.mark.parametrize(
    "record",
    [
        None,  # installed from an index, or by a tool that keeps no record
        {"url": "file:///nowhere/arkvory_sched-1.2.3-py3-none-any.whl", "archive_info": {}},
        {"url": "file:///nowhere/checkout", "dir_info": {}},
        {"url": "https://example.org/arkvory_sched-1.2.3-py3-none-any.whl", "archive_info": {}},
        {"url": "git+https://example.org/arkvory-sched", "vcs_info": {"vcs": "git"}},
        {"no": "url"},
    ],
)
def test_without_a_usable_record_the_hint_says_what_works_from_a_checkout_or_wheel(
    tmp_path: Path, record: Mapping[str, object] | None
) -> None:
    hint = _arkvory_launch.install_hint(_installed(tmp_path, record))
    assert hint == (
        "pip install '.[server]' in a checkout of arkvory-sched, "
        "or pip install 'arkvory_sched-1.2.3-py3-none-any.whl[server]' with a wheel built from one"
    )


def test_a_record_that_is_not_json_gives_the_general_hint(tmp_path: Path) -> None:
    distribution = _installed(tmp_path, None)
    (tmp_path / "arkvory_sched-1.2.3.dist-info" / "direct_url.json").write_text("{not json")
    assert _arkvory_launch.install_hint(distribution).startswith("pip install '.[server]' in ")
