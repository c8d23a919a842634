"""The operator artifacts under ``deploy/`` as the tests read them, and promtool.

The rule file is YAML, and the project has no YAML parser (nothing else needs one): its
alerts are read by their shape instead (``- alert: Name``, ``expr: |`` followed by an
indented block), and :func:`alert_rules` fails when that shape is not kept. Every test
that reads them also runs promtool, which parses the file for real, and compares the
number of rules it found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = [
    "ALERTS_FILE",
    "ALERTS_TEST_FILE",
    "DASHBOARD_FILE",
    "AlertRule",
    "alert_rules",
    "dashboard",
    "dashboard_expressions",
    "panels",
    "promql_of_dashboard",
    "run_promtool",
]

ROOT: Final = Path(__file__).resolve().parents[2]
ALERTS_FILE: Final = ROOT / "deploy" / "prometheus" / "arkvory-alerts.yml"
ALERTS_TEST_FILE: Final = ROOT / "deploy" / "prometheus" / "arkvory-alerts.test.yml"
DASHBOARD_FILE: Final = ROOT / "deploy" / "grafana" / "arkvory-dashboard.json"

#: What Grafana puts in place of its variables, for a PromQL check of the panels.
GRAFANA_VARIABLES: Final = {"$__rate_interval": "5m", "${job}": "arkvory", "$job": "arkvory"}

_ALERT: Final = re.compile(r"^(?P<indent> *)- alert: (?P<name>\w+)$", re.MULTILINE)
_EXPR: Final = re.compile(r"^(?P<indent> +)expr: \|\n", re.MULTILINE)
_FIELD: Final = re.compile(r"^ +(?P<key>for|severity|summary|description): ?(?P<value>.*)$")


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule: its name, expression and the fields an operator relies on."""

    name: str
    expr: str
    fields: dict[str, str]


def alert_rules() -> list[AlertRule]:
    """The alerting rules of :data:`ALERTS_FILE`, in file order."""
    text = ALERTS_FILE.read_text(encoding="utf-8")
    starts = list(_ALERT.finditer(text))
    rules = []
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(text)
        block = text[start.end() : end]
        expr = _expression(block)
        assert expr, f"{start['name']}: write its expr as a block scalar (`expr: |`)"
        fields = {}
        for line in block.splitlines():
            match = _FIELD.match(line)
            if match is not None:
                fields[match["key"]] = match["value"]
        rules.append(AlertRule(start["name"], expr, fields))
    return rules


def _expression(block: str) -> str:
    """The text of the ``expr: |`` block scalar in one rule's block."""
    match = _EXPR.search(block)
    if match is None:
        return ""
    key_indent = len(match["indent"])
    lines = []
    for line in block[match.end() :].splitlines():
        if line.strip() and len(line) - len(line.lstrip(" ")) <= key_indent:
            break
        lines.append(line.strip())
    return "\n".join(lines).strip()


def dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    return document


def panels(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in document["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_expressions(document: dict[str, Any]) -> list[str]:
    """The PromQL of every panel target, as Grafana sends it (variables replaced)."""
    return [
        promql_of_dashboard(target["expr"])
        for panel in panels(document)
        for target in panel.get("targets", [])
    ]


def promql_of_dashboard(expression: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    return expression


def run_promtool(*args: str | Path, cwd: Path | None = None) -> str:
    """Run promtool (Debian's, which ``make test`` installs); its output, or the test
    fails with it. Missing promtool skips the test, and fails it under ``CI=true``: rules
    nobody ran are not tested."""
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = "promtool is missing: `make test` installs it (apt-get install prometheus)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    completed = subprocess.run(
        [promtool, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"promtool {' '.join(map(str, args))}:\n{output}"
    return output
