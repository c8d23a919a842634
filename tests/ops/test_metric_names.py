"""The rules and the dashboard read what the library really serves, on a real scrape.

A rule keeps its meaning only while the names in it exist: after a metric or a label is
renamed, a rule reading the old name selects nothing and never fires, and a panel shows
"No data". So the demo server runs as a real process, with one download holding the only
slot and one waiting (every family is present then, the queue-empty forecast too), its
``/metrics`` is scraped once, and every metric, label and label value that the rules and
the dashboard's queries name is looked up in that scrape. The same scrape then goes
through promtool as the series of a steady hour: on it no alert fires, and without the
fleet-wide families (what a process that does not lead a shared queue exports) the
no-leader alert does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import (
    MIB,
    ONE_SLOT,
    DemoServer,
    SlotHolder,
    write_pattern_file,
)

from ._artifacts import ALERTS_FILE, alert_rules, dashboard, dashboard_expressions, run_promtool
from ._promql import Reads, Selector, reads_of

#: Labels Prometheus attaches to every scraped series, and the series it makes itself.
TARGET_LABELS = frozenset({"job", "instance"})
PROMETHEUS_OWN = {"up": TARGET_LABELS}
JOB = "arkvory-demo"
FLEET_WIDE = "Fleet-wide"  # how a family's help says it comes from the leader only


@dataclass
class Scrape:
    """One ``/metrics`` answer: each sample name's labels and their values."""

    labels: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    help: dict[str, str] = field(default_factory=dict)
    samples: list[tuple[str, dict[str, str], float, str]] = field(default_factory=list)
    """(sample name, labels, value, family name) in the order served."""

    @classmethod
    def of(cls, text: str) -> Scrape:
        scrape = cls()
        for family in text_string_to_metric_families(text):
            scrape.help[family.name] = family.documentation
            for sample in family.samples:
                values = scrape.labels.setdefault(sample.name, {})
                for label, value in sample.labels.items():
                    values.setdefault(label, set()).add(value)
                scrape.samples.append((sample.name, sample.labels, sample.value, family.name))
        return scrape


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> Scrape:
    """The demo's ``/metrics`` with one slot held and one download waiting."""
    base = tmp_path_factory.mktemp("metric-names")
    root = base / "served"
    for name in ("held.bin", "queued.bin"):
        write_pattern_file(root / name, 2 * MIB)
    # No hold: the waiting download, next in line, is answered at once instead of held at
    # the door for the idle holder's slot (R-HOLD-2).
    env = {**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": "0"}
    server = DemoServer(root, base / "server.log", env=env, bandwidth=40_000_000, tokens=())
    server.start()
    try:
        SlotHolder(server, "held.bin", "holds-the-slot").take()
        waiting = httpx.get(
            server.url("queued.bin"), headers={"Arkvory-Download-Id": "waits"}, timeout=10.0
        )
        assert waiting.status_code == 503, waiting.text
        text = httpx.get(f"{server.base_url}/metrics", timeout=10.0).text
    finally:
        server.stop()
    return Scrape.of(text)


def _expressions() -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every alert and every dashboard query and variable."""
    for rule in alert_rules():
        yield rule.name, rule.expr
    document = dashboard()
    for expression in dashboard_expressions(document):
        yield "dashboard", expression
    for variable in document["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(metric, label): the metric, and the label it lists.
            inner = variable["definition"].removeprefix("label_values(").removesuffix(")")
            metric, _, label = (part.strip() for part in inner.partition(","))
            yield f"variable {variable['name']}", f"max by ({label}) ({metric})"


def _problems(reads: Reads, scrape: Scrape) -> Iterator[str]:
    known: dict[str, dict[str, set[str]]] = {
        **{name: {label: set() for label in labels} for name, labels in PROMETHEUS_OWN.items()},
        **scrape.labels,
    }
    selected: set[str] = set()
    for selector in reads.selectors:
        labels = known.get(selector.metric)
        if labels is None:
            yield f"{selector.metric} is not served"
            continue
        selected.update(labels)
        yield from _matcher_problems(selector, labels)
    for label in sorted(reads.grouping - selected - TARGET_LABELS):
        yield f"no series it reads has the label {label!r} it groups by"


def _matcher_problems(selector: Selector, labels: dict[str, set[str]]) -> Iterator[str]:
    for label, op, value in selector.matchers:
        if label in TARGET_LABELS:
            continue
        if label not in labels:
            yield f"{selector.metric} has no label {label!r}"
        elif op == "=" and value not in labels[label]:
            yield f"{selector.metric}{{{label}}} is never {value!r} (served: {labels[label]})"


def test_every_metric_label_and_value_the_rules_and_the_dashboard_read_is_served(
    scrape: Scrape,
) -> None:
    problems = []
    read: set[str] = set()
    for where, expression in _expressions():
        reads = reads_of(expression)
        read |= reads.metrics
        problems += [
            f"{where}: {problem}\n  in {expression}" for problem in _problems(reads, scrape)
        ]
    assert not problems, "\n".join(problems)
    # The check saw the series the alerts stand on, so it would have seen them missing.
    assert {
        "arkvory_download_idle_slots",
        "arkvory_download_session_slots",
        "arkvory_download_client_estimate_inside_interval_total",
        "arkvory_download_rejections_total",
        "arkvory_download_queue_empty_in_seconds",
    } <= read


def test_a_misspelt_metric_or_label_is_caught(scrape: Scrape) -> None:
    """The check above can fail: the names as they would read after a rename."""
    renamed = reads_of('sum by (kind) (rate(arkvory_download_rejected_total{reason="full"}[5m]))')
    assert list(_problems(renamed, scrape)) == [
        "arkvory_download_rejected_total is not served",
        "no series it reads has the label 'kind' it groups by",
    ]
    wrong_value = reads_of('arkvory_download_sessions{state="queued", klass="bulk"}')
    assert list(_problems(wrong_value, scrape)) == [
        "arkvory_download_sessions{state} is never 'queued' "
        f"(served: {scrape.labels['arkvory_download_sessions']['state']})",
        "arkvory_download_sessions has no label 'klass'",
    ]


def test_the_no_leader_alert_stands_on_a_process_metric_and_a_fleet_wide_one(
    scrape: Scrape,
) -> None:
    """Every process serves the session slots; only the queue's leader the idle slots."""
    assert FLEET_WIDE not in scrape.help["arkvory_download_session_slots"]
    assert FLEET_WIDE in scrape.help["arkvory_download_idle_slots"]
    rule = {rule.name: rule for rule in alert_rules()}["ArkvoryNoQueueLeader"]
    assert reads_of(rule.expr).metrics == {
        "arkvory_download_session_slots",
        "arkvory_download_idle_slots",
    }


def test_on_an_hour_of_the_real_metrics_no_alert_fires(scrape: Scrape, tmp_path: Path) -> None:
    names = [rule.name for rule in alert_rules()]
    checks = [{"eval_time": "60m", "alertname": name, "exp_alerts": []} for name in names]
    _promtool_test(tmp_path, _steady_series(scrape), alert_rule_test=checks)


def test_without_the_fleet_wide_figures_the_no_leader_alert_finds_the_job(
    scrape: Scrape, tmp_path: Path
) -> None:
    """A process that does not lead exports no fleet-wide family: alone, it has no leader."""
    not_leading = _steady_series(scrape, fleet_wide=False)
    assert len(not_leading) < len(_steady_series(scrape))
    rule = {rule.name: rule for rule in alert_rules()}["ArkvoryNoQueueLeader"]
    with_leader = {"expr": rule.expr, "eval_time": "60m", "exp_samples": []}
    _promtool_test(tmp_path / "led", _steady_series(scrape), promql_expr_test=[with_leader])
    without = {
        "expr": rule.expr,
        "eval_time": "60m",
        "exp_samples": [{"labels": f'{{job="{JOB}"}}', "value": 1}],
    }
    _promtool_test(tmp_path / "not-led", not_leading, promql_expr_test=[without])


def _steady_series(scrape: Scrape, *, fleet_wide: bool = True) -> list[dict[str, str]]:
    """Each scraped sample as a series holding its value for an hour, with the labels
    a scrape of job :data:`JOB` adds."""
    series = []
    for name, labels, value, family in scrape.samples:
        if not fleet_wide and FLEET_WIDE in scrape.help[family]:
            continue
        assert math.isfinite(value), (name, labels, value)
        every = {"job": JOB, "instance": "127.0.0.1:8000", **labels}
        inner = ",".join(f"{key}={json.dumps(text)}" for key, text in sorted(every.items()))
        series.append({"series": f"{name}{{{inner}}}", "values": f"{value!r}x60"})
    return series


def _promtool_test(directory: Path, series: list[dict[str, str]], **checks: object) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    test = {
        "rule_files": [str(ALERTS_FILE)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, **checks}],
    }
    path = directory / "real-scrape.test.yml"  # JSON is YAML
    path.write_text(json.dumps(test, indent=1))
    output = run_promtool("test", "rules", path)
    assert "SUCCESS" in output, output
