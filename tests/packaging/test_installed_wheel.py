"""The wheel as a user installs it: the client alone is light, the server extra works.

Built and installed by the README's own commands (its "Install" block with
``pip wheel``), run in a copy of the source tree (so the build writes nothing into the
checkout and two runs cannot meet), each ``pip install`` into a fresh virtual
environment that sees nothing of the development environment: no ``PYTHONPATH``, no
site-packages. pip's cache is the user's usual one, so after the first run the
installs come from it.

Proven here (ADR 0026, issue #29):

- the README's build command makes the wheel the README names;
- its client line installs no server package, and that install's ``arkvoryctl``
  downloads a session-sized file byte for byte from a real demo server (run from the
  development environment);
- on that install ``arkvory-demo`` and ``arkvory-sched`` exit 2 with the command that
  adds the server to it: the wheel's own path with ``[server]`` (the package is on no
  index), the file the README's server line names;
- following that hint gives a server install that runs ``arkvory-sched migrate``
  against PostgreSQL with the migrations shipped inside the wheel;
- every installed command's ``--version`` is the distribution's version.

These tests need the package index (through pip's configuration) and, for the server
half, PostgreSQL; without the index they fail rather than skip, as a packaging error
would look the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from _arkvory_launch import SERVER_MODULES
from arkvory_sched.postgres._migrate import load_migrations
from tests.integration.conftest import (
    MIB,
    ONE_SLOT,
    DemoServer,
    sha256_file,
    write_pattern_file,
)
from tests.pg import connect, drop_schema, require_database, schema_name, throwaway_schema
from tests.readme_fences import fence

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]
INSTALL_SECONDS = 300.0
RUN_SECONDS = 60.0
SERVER_COMMANDS = ("arkvory-demo", "arkvory-sched")
HINT = "install it with: "


def _readme_wheel_commands() -> tuple[list[str], list[str], list[str]]:
    """The README's build, client and server commands of its wheel block, split."""
    lines = fence("pip wheel", language="sh").text.splitlines()
    build, client, server = (shlex.split(line, comments=True) for line in lines)
    assert build[:2] == ["pip", "wheel"], build
    assert client[:2] == server[:2] == ["pip", "install"], (client, server)
    return build, client, server


BUILD, CLIENT_INSTALL, SERVER_INSTALL = _readme_wheel_commands()


def _name(requirement: str) -> str:
    """``prometheus-client>=0.20`` -> ``prometheus-client`` (PEP 503 normalised)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match[0]).lower()


SERVER_DISTRIBUTIONS = {_name(r) for r in PROJECT["optional-dependencies"]["server"]}
CLIENT_DISTRIBUTIONS = {_name(r) for r in PROJECT["dependencies"]}


def _run(
    argv: list[str | Path],
    *,
    timeout: float = RUN_SECONDS,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    """Run a command that must succeed; its output is the failure message otherwise."""
    done = subprocess.run(
        [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=cwd,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def _outside_env() -> dict[str, str]:
    """The environment of pip and of the installed commands: nothing points back at the
    checkout (``PYTHONPATH``) or at the development environment (``VIRTUAL_ENV``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARKVORY_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def _copy_source(target: Path) -> Path:
    """What a clean checkout holds for the build: no caches, metadata or symlinks.

    The symlink ``src/arkvory_sched/migrations`` some checkouts have is left out on
    purpose: the wheel must get the migrations from pyproject's ``package-dir``.
    """

    def ignored(directory: str, names: list[str]) -> set[str]:
        return {
            name
            for name in names
            if name in {"__pycache__", "build"}
            or name.endswith(".egg-info")
            or os.path.islink(os.path.join(directory, name))
        }

    target.mkdir()
    for name in ("pyproject.toml", "README.md", *(p.name for p in ROOT.glob("LICEN[CS]E*"))):
        shutil.copy2(ROOT / name, target / name)
    for name in ("src", "migrations"):
        shutil.copytree(ROOT / name, target / name, ignore=ignored)
    return target


def _pip(*args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def _new_env(path: Path, *arguments: str, cwd: Path | None = None) -> Path:
    """A virtual environment without pip (the running pip installs into it) after
    ``pip install ARGUMENTS`` run in ``cwd``; its bin/."""
    venv.create(path, with_pip=False)
    _install(path / "bin", *arguments, cwd=cwd)
    return path / "bin"


def _install(bin_dir: Path, *arguments: str, cwd: Path | None = None) -> None:
    """``pip install ARGUMENTS`` into the environment of ``bin_dir``, as its own pip."""
    _run(
        _pip("--python", bin_dir / "python", "install", "--quiet", *arguments),
        timeout=INSTALL_SECONDS,
        env=_outside_env(),
        cwd=cwd,
    )


def _hint(bin_dir: Path, command: str) -> str:
    """What ``command`` of a client-only install says to install: exit 2, one line."""
    done = subprocess.run(
        [bin_dir / command, "--help"],
        capture_output=True,
        text=True,
        env=_outside_env(),
        timeout=RUN_SECONDS,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{command}: the server is not installed (no module "), line
    return line.partition(HINT)[2]


def _distributions(bin_dir: Path) -> set[str]:
    python = bin_dir / "python"
    listed = json.loads(_run(_pip("--python", python, "list", "--format=json"), env=_outside_env()))
    return {_name(entry["name"]) for entry in listed}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel the README's build command makes in a checkout (a copy of it)."""
    source = _copy_source(tmp_path_factory.mktemp("wheel") / "source")
    _run(_pip(*BUILD[1:], "--quiet"), timeout=INSTALL_SECONDS, env=_outside_env(), cwd=source)
    (built,) = (source / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def client(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's client line: the bin/ of an environment with the client only."""
    checkout = wheel.parent.parent
    return _new_env(tmp_path_factory.mktemp("client") / "env", *CLIENT_INSTALL[2:], cwd=checkout)


@pytest.fixture(scope="module")
def server(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A client install made a server install by following ``arkvory-demo``'s hint."""
    checkout = wheel.parent.parent
    made = _new_env(tmp_path_factory.mktemp("server") / "env", *CLIENT_INSTALL[2:], cwd=checkout)
    hint = shlex.split(_hint(made, "arkvory-demo"))
    assert hint[:2] == ["pip", "install"], hint
    _install(made, *hint[2:])
    return made


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """The demo server from the development environment; files above 1 MiB are sessions."""
    base = tmp_path_factory.mktemp("demo")
    (base / "served").mkdir()
    server = DemoServer(
        base / "served", base / "server.log", env=ONE_SLOT, bandwidth=None, tokens=()
    )
    server.start()
    yield server
    server.stop()


def test_the_client_install_has_no_server_package(client: Path) -> None:
    installed = _distributions(client)
    assert {"arkvory-sched", *CLIENT_DISTRIBUTIONS} <= installed
    assert installed & SERVER_DISTRIBUTIONS == set()
    probe = (
        "import importlib.util, sys, arkvory_client; print(arkvory_client.__file__); "
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)) or '-')"
    )
    out = _run([client / "python", "-c", probe, *sorted(SERVER_MODULES)], env=_outside_env())
    where, found = out.splitlines()
    assert Path(where).is_relative_to(client.parent), where
    assert found == "-", f"server modules importable on a client install: {found}"


def test_installed_arkvoryctl_downloads_from_a_real_server(
    client: Path, demo: DemoServer, tmp_path: Path
) -> None:
    digest = write_pattern_file(demo.root / "image.bin", 3 * MIB + 5, seed="wheel")
    _run(
        [client / "arkvoryctl", "download", demo.url("image.bin"), "-o", tmp_path / "got.bin"],
        env=_outside_env(),
        cwd=tmp_path,
    )
    assert sha256_file(tmp_path / "got.bin") == digest
    assert sorted(path.name for path in tmp_path.iterdir()) == ["got.bin"]


def test_the_readme_names_the_wheel_its_build_command_makes(wheel: Path) -> None:
    assert Path(CLIENT_INSTALL[2]).name == wheel.name
    assert SERVER_INSTALL[2] == f"{CLIENT_INSTALL[2]}[server]"


@pytest.mark.parametrize("command", SERVER_COMMANDS)
def test_server_commands_without_the_extra_name_the_wheel_they_came_from(
    client: Path, wheel: Path, command: str
) -> None:
    # The README's server line, on the wheel the client came from, with its full path.
    hint = _hint(client, command)
    assert hint == f"pip install {shlex.quote(f'{wheel}[server]')}"
    assert Path(shlex.split(hint)[2]) == wheel.parent.parent / SERVER_INSTALL[2]
    assert "'arkvory-sched[server]'" not in hint


def test_arkvoryctl_version_on_the_client_install(client: Path) -> None:
    out = _run([client / "arkvoryctl", "--version"], env=_outside_env())
    assert out == f"arkvoryctl {VERSION}\n"


def test_following_the_hint_brings_every_server_package(server: Path) -> None:
    assert {"arkvory-sched", *CLIENT_DISTRIBUTIONS, *SERVER_DISTRIBUTIONS} <= _distributions(server)


@pytest.mark.parametrize("command", ["arkvoryctl", *SERVER_COMMANDS])
def test_every_command_of_the_server_install_prints_its_version(server: Path, command: str) -> None:
    out = _run([server / command, "--version"], env=_outside_env())
    assert out == f"{command} {VERSION}\n"


def test_installed_arkvory_sched_migrates_postgres(server: Path) -> None:
    url = require_database()
    schema = schema_name("wheel")
    migrate: list[str | Path] = [
        server / "arkvory-sched",
        "migrate",
        "--dsn",
        url,
        "--schema",
        schema,
    ]
    try:
        first = _run(migrate, env=_outside_env())
        again = _run(migrate, env=_outside_env())
        installed, source = asyncio.run(_tables_beside_the_source(schema))
    finally:
        asyncio.run(drop_schema(schema))
    # Every migration of the source tree was in the wheel, and each was applied once.
    assert first.splitlines() == [f"applied {m.version}" for m in load_migrations()]
    assert again == f"up to date (schema {schema})\n"
    assert installed == source
    assert len(installed) > 1, installed


async def _tables_beside_the_source(schema: str) -> tuple[set[str], set[str]]:
    """The tables of ``schema``, and of one migrated by the source tree's code."""
    async with throwaway_schema("src") as reference:
        connection = await connect()
        try:
            return await _tables(connection, schema), await _tables(connection, reference)
        finally:
            await connection.close()


async def _tables(connection: asyncpg.Connection, schema: str) -> set[str]:
    rows = await connection.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
    )
    return {row["table_name"] for row in rows}


def test_the_installed_wheel_serves_the_operator_page_from_its_own_files(server: Path) -> None:
    # The page's HTML, CSS and modules are package data (ADR 0024): one missing from the
    # wheel works from a checkout and breaks the page of every installed server.
    script = (
        "import httpx, asyncio\n"
        "from arkvory_sched.api import Identity\n"
        "from arkvory_sched.console import operator_page\n"
        "app = operator_page(authorize=lambda r: Identity('viewer', 'v'))\n"
        "async def main():\n"
        "    t = httpx.ASGITransport(app=app)\n"
        "    async with httpx.AsyncClient(transport=t, base_url='http://x') as c:\n"
        "        page = await c.get('/')\n"
        "        files = [await c.get('/static/' + n) for n in\n"
        "                 ('main.js', 'settings.js', 'form_editors.js', 'console.css',\n"
        "                  'favicon.svg', 'favicon.ico')]\n"
        "        print(page.status_code, [f.status_code for f in files])\n"
        "asyncio.run(main())\n"
    )
    out = _run([server / "python", "-c", script], env=_outside_env(), cwd=server)
    assert out == "200 [200, 200, 200, 200, 200, 200]\n"
