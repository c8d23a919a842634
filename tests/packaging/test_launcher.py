"""The server commands on a client-only install: one line saying what to install.

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
from pathlib import Path

import pytest

import _arkvory_launch

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


def test_the_scripts_point_at_the_launcher_and_the_client() -> None:
    assert SCRIPTS == {
        "arkvory-demo": "_arkvory_launch:demo",
        "arkvory-sched": "_arkvory_launch:sched",
        "arkvoryctl": "arkvory_client._cli:main",
    }


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
