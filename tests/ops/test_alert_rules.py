"""The alerting rules and the dashboard, checked and unit-tested by promtool.

``promtool check rules`` parses the rule file as Prometheus will; ``promtool test
rules`` runs ``deploy/prometheus/arkvory-alerts.test.yml``, in which every alert fires on
a synthetic series of its trouble and stays silent on a healthy one. The dashboard's
queries go through the same parser as recording rules. That the names they use are
the library's is ``test_metric_names.py``'s part, against a real scrape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ._artifacts import (
    ALERTS_FILE,
    ALERTS_TEST_FILE,
    alert_rules,
    dashboard,
    dashboard_expressions,
    panels,
    run_promtool,
)

#: The troubles issue #29 asks for, and the two a shared queue adds (ADR 0036).
EXPECTED_ALERTS = (
    "ArkvoryQueueStalled",
    "ArkvoryIdleSlotsWhileWaiting",
    "ArkvoryEstimatesMissTheirInterval",
    "ArkvoryNoQueueLeader",
    "ArkvoryQueueLeaderStale",
    "ArkvoryDatabaseUnavailable",
    "ArkvoryTickSlow",
)
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_promtool_accepts_the_rules_and_finds_each_alert() -> None:
    output = run_promtool("check", "rules", ALERTS_FILE)
    found = re.search(r"SUCCESS: (\d+) rules found", output)
    assert found is not None, output
    names = [rule.name for rule in alert_rules()]
    assert int(found[1]) == len(names), "the tests read fewer alerts than promtool does"
    assert names == list(EXPECTED_ALERTS)


def test_every_alert_waits_has_a_severity_and_tells_what_to_do() -> None:
    for rule in alert_rules():
        assert set(rule.fields) == {"for", "severity", "summary", "description"}, rule.name
        assert re.fullmatch(r"\d+[smh]", rule.fields["for"]), rule.name
        assert rule.fields["severity"] in {"critical", "warning"}, rule.name


def test_every_alert_fires_on_its_trouble_and_not_on_a_healthy_series() -> None:
    text = ALERTS_TEST_FILE.read_text(encoding="utf-8")
    tested = set(re.findall(r"alertname: (\w+)", text))
    assert tested == set(EXPECTED_ALERTS), "every alert has its promtool tests"
    firing = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n", text))
    silent = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts: \[\]", text))
    assert firing == silent == set(EXPECTED_ALERTS), "each fires once and stays silent once"
    output = run_promtool("test", "rules", ALERTS_TEST_FILE.name, cwd=ALERTS_TEST_FILE.parent)
    assert "SUCCESS" in output, output


def test_the_dashboards_queries_are_promql(tmp_path: Path) -> None:
    """Each panel's query as a recording rule: promtool parses every one."""
    expressions = dashboard_expressions(dashboard())
    assert len(expressions) >= 20
    rules = [
        {"record": f"arkvory:dashboard_query_{number}", "expr": expression}
        for number, expression in enumerate(expressions)
    ]
    path = tmp_path / "dashboard-queries.yml"  # JSON is YAML
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    output = run_promtool("check", "rules", path)
    assert f"SUCCESS: {len(expressions)} rules found" in output, output


def test_the_dashboard_asks_for_its_data_source_when_imported_or_provisioned() -> None:
    """No data source of one installation baked in: a ``datasource`` variable that any
    Prometheus fills, and every panel and query reading through it."""
    document = dashboard()
    variables = {variable["name"]: variable for variable in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["datasource"] == DATASOURCE
    assert "__inputs" not in document and "id" not in document
    assert document["uid"] == "arkvory-downloads"
    ids = []
    for panel in panels(document):
        ids.append(panel["id"])
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'job="$job"' in target["expr"], (panel["title"], target["expr"])
    assert len(ids) == len(set(ids)), "panel ids are unique"
