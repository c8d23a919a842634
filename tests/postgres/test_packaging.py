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
