"""docs/clients.md's recipes, as the tests run them.

Each recipe is the tool's own options as the page shows them. The tests run them word
for word, except where a test needs a smaller number: a few tries to see a tool give up,
or a delay shorter than the page's 10 s so the suite stays quick (:func:`replaced`).
``test_the_page_shows_the_tested_recipes`` checks that the page still shows these.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "ARIA2C_RECIPE",
    "CURL_RECIPE",
    "NPM_RECIPE",
    "PIP_RECIPE",
    "WGET_RECIPE",
    "aria2c_command",
    "curl_command",
    "npm_command",
    "npmrc",
    "pip_command",
    "pip_conf",
    "replaced",
    "wget_command",
]

CURL_RECIPE: Final = (
    "--fail",
    "--retry",
    "100000",
    "--retry-max-time",
    "86400",
    "--retry-delay",
    "10",
    "--continue-at",
    "-",
)
WGET_RECIPE: Final = ("--retry-on-http-error=503", "--tries=0", "--waitretry=10", "--continue")
ARIA2C_RECIPE: Final = ("--max-tries=0", "--retry-wait=10")
#: pip.conf's ``[global]`` section.
PIP_RECIPE: Final = {"timeout": "60", "retries": "1000"}
#: .npmrc's lines.
NPM_RECIPE: Final = {
    "fetch-retries": "1000",
    "fetch-retry-factor": "1",
    "fetch-retry-mintimeout": "10000",
    "fetch-retry-maxtimeout": "10000",
}


def replaced(recipe: Sequence[str], option: str, value: str) -> tuple[str, ...]:
    """The command-line ``recipe`` with ``option``'s value changed (``--opt=value`` or
    ``--opt value``); the option must be in it."""
    result = list(recipe)
    for index, word in enumerate(result):
        if word.startswith(f"{option}="):
            result[index] = f"{option}={value}"
            return tuple(result)
        if word == option:
            result[index + 1] = value
            return tuple(result)
    raise ValueError(f"{option} is not in the recipe {recipe}")


def pip_conf(**changes: str) -> str:
    """The pip.conf recipe, with ``changes`` to its values."""
    values = {**PIP_RECIPE, **changes}
    return "[global]\n" + "".join(f"{key} = {value}\n" for key, value in values.items())


def npmrc(**changes: str) -> str:
    """The .npmrc recipe, with ``changes`` to its values (``fetch_retries=`` for
    ``fetch-retries``)."""
    values = {**NPM_RECIPE, **{key.replace("_", "-"): value for key, value in changes.items()}}
    return "".join(f"{key}={value}\n" for key, value in values.items())


# The command lines: the recipe, the URL, where the bytes go, and what keeps a test apart
# from the machine it runs on (no configuration file of the user or of the system).


def curl_command(curl: str, recipe: Sequence[str], out: Path, url: str) -> list[str]:
    return [curl, "--disable", "--silent", "--show-error", *recipe, "--output", str(out), url]


def wget_command(wget: str, recipe: Sequence[str], url: str) -> list[str]:
    """wget saves the file under its name in the working directory."""
    return [wget, "--no-config", *recipe, url]


def aria2c_command(aria2c: str, recipe: Sequence[str], directory: Path, url: str) -> list[str]:
    quiet = ("--console-log-level=warn", "--summary-interval=0")
    return [aria2c, "--no-conf", *quiet, *recipe, "--dir", str(directory), url]


def pip_command(target: Path, url: str) -> list[str]:
    """pip of the test's own virtual environment; its recipe comes in a pip.conf."""
    install = ("install", "--no-index", "--no-cache-dir", "--target", str(target))
    return [sys.executable, "-m", "pip", *install, url]


def npm_command(npm: str, config: Path, cache: Path, registry: str, url: str) -> list[str]:
    """npm with its recipe in ``config`` (a user .npmrc) and a cache of its own. A
    ``registry`` on the test's proxy shows any request npm would make beside the
    tarball; audit, funding and update checks would be such requests."""
    return [
        npm,
        "install",
        f"--userconfig={config}",
        f"--cache={cache}",
        f"--registry={registry}",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        url,
    ]
