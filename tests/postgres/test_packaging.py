"""The wheel must hold every package: pyproject.toml lists them by hand."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_under_src_is_listed_in_pyproject() -> None:
    # Listing by hand is needed to ship migrations/ as arkvory_sched.migrations; a new
    # package that is not listed would work in an editable install and be missing from
    # the wheel, which no other test would notice.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT / "src").parts)
        for init in (ROOT / "src").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert "arkvory_sched.migrations" in listed
    assert config["tool"]["setuptools"]["package-dir"]["arkvory_sched.migrations"] == "migrations"
    assert (ROOT / "migrations" / "__init__.py").is_file()


def test_every_module_at_the_top_of_src_is_listed_in_pyproject() -> None:
    # The server commands' launcher (_arkvory_launch.py, ADR 0026) belongs to no package,
    # so `packages` does not ship it: a script pointing at a module missing from the
    # wheel fails on every install.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["py-modules"])
    assert {path.stem for path in (ROOT / "src").glob("*.py")} == listed
    assert "_arkvory_launch" in listed


def test_every_data_file_under_src_is_shipped_as_package_data() -> None:
    # The SQL files are read with importlib.resources: one that no package-data pattern
    # matches works from a checkout and is missing from the wheel.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]
    missing = []
    for path in (ROOT / "src").rglob("*"):
        if not path.is_file() or path.suffix in {".py", ".pyc"} or "__pycache__" in path.parts:
            continue
        if any(part.endswith(".egg-info") for part in path.parts):
            continue  # an editable install's metadata, not a package's data
        package = ".".join(path.parent.relative_to(ROOT / "src").parts)
        if not any(path.match(pattern) for pattern in patterns.get(package, [])):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"add to [tool.setuptools.package-data]: {missing}"
    assert {"schema.sql", "statements.sql"} <= {
        path.name for path in (ROOT / "src" / "arkvory_sched" / "sqlite").glob("*.sql")
    }
