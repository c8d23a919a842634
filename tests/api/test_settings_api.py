"""The settings resource over HTTP (R-SET-1..6): read, compare-and-set, refusals, audit.

Every test runs against a real uvicorn server and a real store (SQLite file and
PostgreSQL schema); a refused write is followed by a read that proves nothing changed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from arkvory_sched import SchedulerSettings, SettingsStore, Strategy
from arkvory_sched.api import MAX_BODY_BYTES, PROBLEM_TYPE_PREFIX
from arkvory_sched.postgres import PostgresSettingsStore

from .conftest import (
    ENVIRONMENT,
    OPERATOR_TOKEN,
    SECOND_OPERATOR_TOKEN,
    VIEWER_TOKEN,
    ApiServer,
    headers,
)

SETTINGS = "/settings"


def read(api_server: ApiServer, client: httpx.Client, token: str = OPERATOR_TOKEN) -> Any:
    response = client.get(api_server.url(SETTINGS), headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.json()


def put(
    api_server: ApiServer,
    client: httpx.Client,
    body: dict[str, object],
    token: str | None = OPERATOR_TOKEN,
    **extra: str,
) -> httpx.Response:
    return client.put(api_server.url(SETTINGS), json=body, headers=headers(token, **extra))


def assert_problem(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    document: dict[str, Any] = response.json()
    assert document["type"] == PROBLEM_TYPE_PREFIX + reason
    assert document["status"] == status
    assert document["reason"] == reason
    assert document["title"]
    assert document["detail"]
    return document


def assert_unchanged(api_server: ApiServer, client: httpx.Client, revision: int) -> None:
    document = read(api_server, client)
    assert document["revision"] == revision


def test_a_fresh_record_is_the_environment(api_server: ApiServer, client: httpx.Client) -> None:
    response = client.get(
        api_server.url(SETTINGS), headers={"authorization": f"Bearer {VIEWER_TOKEN}"}
    )
    assert response.status_code == 200
    assert response.headers["etag"] == '"rev-0"'
    assert response.headers["cache-control"] == "no-store"
    document = response.json()
    assert document["revision"] == 0
    assert document["updatedBy"] is None
    assert document["updatedAt"] is None
    assert document["record"] == {}
    assert document["problems"] == []
    assert document["adjusted"] == []
    assert document["settings"] == ENVIRONMENT.operator_fields()
    assert set(document["sources"].values()) == {"environment"}
    assert set(document["sources"]) == set(ENVIRONMENT.operator_fields())


def test_a_change_is_saved_applied_and_attributed(
    api_server: ApiServer, client: httpx.Client
) -> None:
    response = put(api_server, client, {"expectedRevision": 0, "strategy": "smallest-first"})
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"rev-1"'
    document = response.json()
    assert document["revision"] == 1
    assert document["updatedBy"] == "olga"
    assert document["updatedAt"].endswith("Z")
    assert document["record"] == {"strategy": "smallest-first"}
    assert document["settings"]["strategy"] == "smallest-first"
    assert document["sources"]["strategy"] == "operator"
    assert document["sources"]["sessions"] == "environment"
    # Applied in this process before the answer (R-SET-3).
    assert document["appliedRevision"] == 1
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings.strategy is Strategy.SMALLEST_FIRST
    again = read(api_server, client, VIEWER_TOKEN)
    assert {key: again[key] for key in ("revision", "record", "settings", "sources")} == {
        key: document[key] for key in ("revision", "record", "settings", "sources")
    }


def test_sessions_alone_lowers_reserve_and_share_and_never_raises_them(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """R-SET-2: eight slots give a reserve of 1 and a share of 2. Three slots: no
    reserve below four, share 1. Thirty-two slots: both stay as they were."""
    assert (ENVIRONMENT.reserve, ENVIRONMENT.per_principal) == (1, 2)
    lowered = put(api_server, client, {"expectedRevision": 0, "sessions": 3}).json()
    assert lowered["record"] == {"sessions": 3}
    assert (lowered["settings"]["reserve"], lowered["settings"]["perPrincipal"]) == (0, 1)
    assert sorted(lowered["adjusted"]) == ["perPrincipal", "reserve"]
    assert lowered["sources"]["reserve"] == "environment"
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings.sessions == 3
    assert api_server.scheduler.settings.reserve == 0

    raised = put(api_server, client, {"expectedRevision": 1, "sessions": 32}).json()
    assert (raised["settings"]["reserve"], raised["settings"]["perPrincipal"]) == (1, 2)
    assert raised["adjusted"] == []


def test_an_empty_record_returns_to_the_environment(
    api_server: ApiServer, client: httpx.Client
) -> None:
    changed = {"expectedRevision": 0, "sessions": 4, "weights": [9, 5, 3, 1], "preempt": False}
    assert put(api_server, client, changed).status_code == 200
    response = put(api_server, client, {"expectedRevision": 1})
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["revision"] == 2
    assert document["record"] == {}
    assert document["settings"] == ENVIRONMENT.operator_fields()
    assert set(document["sources"].values()) == {"environment"}
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings.sessions == ENVIRONMENT.sessions


def test_a_stale_revision_is_409_naming_the_current_one_and_who(
    api_server: ApiServer, client: httpx.Client
) -> None:
    assert put(api_server, client, {"expectedRevision": 0, "sessions": 6}).status_code == 200
    late = put(api_server, client, {"expectedRevision": 0, "sessions": 10}, SECOND_OPERATOR_TOKEN)
    problem = assert_problem(late, 409, "revision_mismatch")
    assert problem["currentRevision"] == 1
    assert problem["expectedRevision"] == 0
    assert problem["updatedBy"] == "olga"
    assert late.headers["etag"] == '"rev-1"'
    document = read(api_server, client)
    assert (document["revision"], document["record"]) == (1, {"sessions": 6})
    history = client.get(
        api_server.url("/settings/history"), headers={"authorization": f"Bearer {VIEWER_TOKEN}"}
    ).json()
    newest = history["entries"][0]
    assert (newest["actor"], newest["outcome"], newest["expectedRevision"]) == (
        "oscar",
        "revision_mismatch",
        0,
    )


def test_if_match_carries_the_revision(api_server: ApiServer, client: httpx.Client) -> None:
    etag = client.get(
        api_server.url(SETTINGS), headers={"authorization": f"Bearer {OPERATOR_TOKEN}"}
    ).headers["etag"]
    response = put(api_server, client, {"sessions": 6}, if_match=etag)
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"rev-1"'
    # HTTP's own precondition fails with 412 (RFC 9110), the same problem type.
    stale = put(api_server, client, {"sessions": 7}, if_match=etag)
    assert assert_problem(stale, 412, "revision_mismatch")["currentRevision"] == 1
    disagree = put(api_server, client, {"expectedRevision": 0, "sessions": 7}, if_match='"rev-1"')
    problem = assert_problem(disagree, 400, "invalid_settings")
    assert problem["invalidParams"][0]["name"] == "/expectedRevision"
    wildcard = put(api_server, client, {"sessions": 7}, if_match="*")
    assert_problem(wildcard, 400, "invalid_precondition")
    assert_unchanged(api_server, client, 1)


def test_a_change_without_a_revision_is_428(api_server: ApiServer, client: httpx.Client) -> None:
    response = put(api_server, client, {"sessions": 6})
    assert_problem(response, 428, "precondition_required")
    assert_unchanged(api_server, client, 0)


def test_bad_fields_are_named_by_json_pointer_and_nothing_is_saved(
    api_server: ApiServer, client: httpx.Client
) -> None:
    body = {
        "expectedRevision": 0,
        "sessions": 0,
        "classWindows": {
            "bulk": {
                "windows": [
                    {"weekdays": ["mon"], "start": "22:00", "end": "06:00", "zone": "Mars/Base"}
                ]
            }
        },
        "serviceAccountClasses": {"ci-bot": "urgent"},
        "colour": "blue",
    }
    response = put(api_server, client, body)
    problem = assert_problem(response, 400, "invalid_settings")
    names = {param["name"] for param in problem["invalidParams"]}
    assert names == {
        "/sessions",
        "/classWindows/bulk/windows/0/zone",
        "/serviceAccountClasses/ci-bot",
        "/colour",
    }, problem
    assert all(param["reason"] for param in problem["invalidParams"])
    assert_unchanged(api_server, client, 0)
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings == ENVIRONMENT
    history = client.get(
        api_server.url("/settings/history"), headers={"authorization": f"Bearer {OPERATOR_TOKEN}"}
    ).json()
    assert [entry["outcome"] for entry in history["entries"]] == ["invalid"]


def test_a_reserve_is_judged_beside_the_sessions_sent_with_it(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """``reserve: 12`` is wrong for eight slots and right beside ``sessions: 16``."""
    wrong = put(api_server, client, {"expectedRevision": 0, "reserve": 12})
    names = [p["name"] for p in assert_problem(wrong, 400, "invalid_settings")["invalidParams"]]
    assert names == ["/reserve"]
    right = put(api_server, client, {"expectedRevision": 0, "reserve": 12, "sessions": 16})
    assert right.status_code == 200, right.text


def test_min_sessions_round_trips_and_null_unsets_it(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """ADR 0038: ``minSessions`` set makes the slots size themselves between it and
    ``sessions``; ``null`` in the record unsets it; ``{}`` returns it to the environment."""
    assert ENVIRONMENT.min_sessions is None
    assert read(api_server, client)["settings"]["minSessions"] is None
    response = put(api_server, client, {"expectedRevision": 0, "minSessions": 4})
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["record"] == {"minSessions": 4}
    assert document["settings"]["minSessions"] == 4
    assert document["sources"]["minSessions"] == "operator"
    assert document["environment"]["minSessions"] is None
    # Applied before the answer; the scheduler's own count in force is the sizer's
    # business (ADR 0038), so only the setting itself is asked of it here.
    assert document["appliedRevision"] == 1
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings.min_sessions == 4
    again = read(api_server, client, VIEWER_TOKEN)
    assert (again["record"], again["settings"]) == (document["record"], document["settings"])

    unset = put(api_server, client, {"expectedRevision": 1, "minSessions": None}).json()
    assert unset["record"] == {"minSessions": None}
    assert unset["settings"]["minSessions"] is None
    assert unset["sources"]["minSessions"] == "operator"
    assert api_server.scheduler.settings.min_sessions is None
    assert api_server.scheduler.settings.automatic_sessions is False

    put(api_server, client, {"expectedRevision": 2, "minSessions": 8})
    back = put(api_server, client, {"expectedRevision": 3}).json()
    assert back["settings"] == ENVIRONMENT.operator_fields()
    assert back["sources"]["minSessions"] == "environment"
    assert api_server.scheduler.settings.min_sessions is None


@pytest.mark.parametrize("value", [9, 0, "4", 2.5, True])
def test_a_bad_min_sessions_is_400_naming_it_and_nothing_is_saved(
    api_server: ApiServer, client: httpx.Client, value: object
) -> None:
    response = put(api_server, client, {"expectedRevision": 0, "minSessions": value})
    problem = assert_problem(response, 400, "invalid_settings")
    params = problem["invalidParams"]
    assert [param["name"] for param in params] == ["/minSessions"], problem
    assert "whole number" in params[0]["reason"]
    if value == 9:  # above the eight slots of the environment
        assert "from 1 to 8 (sessions)" in params[0]["reason"]
    assert_unchanged(api_server, client, 0)
    assert api_server.scheduler is not None
    assert api_server.scheduler.settings == ENVIRONMENT


def test_a_min_sessions_is_judged_beside_the_sessions_sent_with_it(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """``minSessions: 12`` is wrong for eight slots and right beside ``sessions: 16``."""
    right = put(api_server, client, {"expectedRevision": 0, "minSessions": 12, "sessions": 16})
    assert right.status_code == 200, right.text
    assert (right.json()["settings"]["minSessions"], right.json()["settings"]["sessions"]) == (
        12,
        16,
    )


@pytest.mark.parametrize(
    ("body", "line", "column"),
    [
        pytest.param(b'{"sessions": 4,\n "reserve": }', 2, 13, id="missing-value"),
        pytest.param(b'{"sessions": 4', 1, 15, id="unterminated"),
        pytest.param(b"", 1, 1, id="empty"),
    ],
)
def test_malformed_json_is_400_with_its_position(
    api_server: ApiServer, client: httpx.Client, body: bytes, line: int, column: int
) -> None:
    response = client.put(api_server.url(SETTINGS), content=body, headers=headers())
    problem = assert_problem(response, 400, "malformed_json")
    assert (problem["position"]["line"], problem["position"]["column"]) == (line, column)
    assert f"line {line}, column {column}" in problem["detail"]
    assert_unchanged(api_server, client, 0)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'[{"sessions": 4}]', id="array"),
        pytest.param(b'{"sessions": 4, "sessions": 5, "expectedRevision": 0}', id="twice"),
        pytest.param(b'{"sessions": 4, "expectedRevision": 0}\xff', id="not-utf8"),
    ],
)
def test_a_body_that_is_not_one_json_object_is_400(
    api_server: ApiServer, client: httpx.Client, body: bytes
) -> None:
    response = client.put(api_server.url(SETTINGS), content=body, headers=headers())
    assert_problem(response, 400, "malformed_json")
    assert_unchanged(api_server, client, 0)


def test_an_expected_revision_must_be_a_whole_number(
    api_server: ApiServer, client: httpx.Client
) -> None:
    for bad in ("1", -1, 1.5, True):
        response = put(api_server, client, {"expectedRevision": bad, "sessions": 4})
        problem = assert_problem(response, 400, "invalid_settings")
        assert problem["invalidParams"][0]["name"] == "/expectedRevision"
    assert_unchanged(api_server, client, 0)


def test_a_body_over_64_kib_is_413_declared_or_streamed(
    api_server: ApiServer, client: httpx.Client
) -> None:
    padding = "x" * MAX_BODY_BYTES
    body = json.dumps({"expectedRevision": 0, "sessions": 4, "note": padding}).encode()
    declared = client.put(api_server.url(SETTINGS), content=body, headers=headers())
    assert_problem(declared, 413, "body_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: read with a limit, not trusted
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    streamed = client.put(api_server.url(SETTINGS), content=chunks(), headers=headers())
    assert "content-length" not in streamed.request.headers
    assert_problem(streamed, 413, "body_too_large")
    assert_unchanged(api_server, client, 0)


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""],
)
def test_writes_are_json_only(
    api_server: ApiServer, client: httpx.Client, content_type: str
) -> None:
    sent = headers(content_type=content_type)
    response = client.put(
        api_server.url(SETTINGS), content=b'{"expectedRevision": 0, "sessions": 4}', headers=sent
    )
    assert_problem(response, 415, "unsupported_media_type")
    assert_unchanged(api_server, client, 0)


def test_who_may_read_and_who_may_write(api_server: ApiServer, client: httpx.Client) -> None:
    for path in (SETTINGS, "/settings/history", "/state"):
        anonymous = client.get(api_server.url(path))
        assert_problem(anonymous, 401, "unauthenticated")
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        stranger = client.get(api_server.url(path), headers={"authorization": "Bearer guess"})
        assert_problem(stranger, 401, "unauthenticated")
        viewer = client.get(
            api_server.url(path), headers={"authorization": f"Bearer {VIEWER_TOKEN}"}
        )
        assert viewer.status_code == 200, (path, viewer.text)
    assert_problem(put(api_server, client, {"expectedRevision": 0}, None), 401, "unauthenticated")
    viewer_write = put(api_server, client, {"expectedRevision": 0, "sessions": 4}, VIEWER_TOKEN)
    problem = assert_problem(viewer_write, 403, "forbidden")
    assert "victor" in problem["detail"]
    assert_unchanged(api_server, client, 0)


@pytest.mark.parametrize(
    ("extra", "allowed"),
    [
        pytest.param({"sec_fetch_site": "cross-site"}, False, id="cross-site"),
        pytest.param({"sec_fetch_site": "same-site"}, False, id="same-site"),
        pytest.param({"sec_fetch_site": "same-origin"}, True, id="same-origin"),
        pytest.param({"sec_fetch_site": "none"}, True, id="typed"),
    ],
)
def test_browsers_may_change_settings_only_from_the_same_origin(
    api_server: ApiServer, client: httpx.Client, extra: dict[str, str], allowed: bool
) -> None:
    response = put(api_server, client, {"expectedRevision": 0, "sessions": 4}, **extra)
    if allowed:
        assert response.status_code == 200, response.text
    else:
        assert_problem(response, 403, "cross_site_request")
        assert_unchanged(api_server, client, 0)


def test_a_client_without_fetch_metadata_must_send_the_request_header(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """A form post from another site, from a browser without Sec-Fetch-Site: it can
    carry cookies, but not a custom header — refused before anything is read."""
    form = client.put(
        api_server.url(SETTINGS),
        content=b"expectedRevision=0&sessions=1",
        headers={
            "authorization": f"Bearer {OPERATOR_TOKEN}",
            "content-type": "application/x-www-form-urlencoded",
        },
    )
    assert assert_problem(form, 403, "cross_site_request")["missingHeader"] == "Arkvory-Request"
    json_without = client.put(
        api_server.url(SETTINGS),
        json={"expectedRevision": 0, "sessions": 1},
        headers={"authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    assert_problem(json_without, 403, "cross_site_request")
    assert_unchanged(api_server, client, 0)


def test_service_account_classes_and_windows_are_part_of_the_record(
    api_server: ApiServer, client: httpx.Client
) -> None:
    nightly = {
        "windows": [
            {"weekdays": ["mon", "tue"], "start": "22:00", "end": "06:00", "zone": "Europe/Berlin"}
        ],
        "outsideShare": 0.25,
    }
    body = {
        "expectedRevision": 0,
        "classWindows": {"bulk": nightly},
        "serviceAccountClasses": {"mirror-sync": "background", "ci-bot": "bulk"},
    }
    document = put(api_server, client, body).json()
    assert document["revision"] == 1
    assert document["record"]["serviceAccountClasses"] == body["serviceAccountClasses"]
    assert document["settings"]["classWindows"]["bulk"]["outsideShare"] == 0.25
    assert document["sources"]["classWindows"] == "operator"
    assert api_server.scheduler is not None
    assert dict(api_server.scheduler.settings.service_account_classes) == {
        "ci-bot": "bulk",
        "mirror-sync": "background",
    }


def test_unknown_paths_and_methods_are_problem_documents(
    api_server: ApiServer, client: httpx.Client
) -> None:
    auth = {"authorization": f"Bearer {OPERATOR_TOKEN}"}
    assert_problem(client.get(api_server.url("/nothing"), headers=auth), 404, "not_found")
    removed = client.delete(api_server.url(SETTINGS), headers=auth)
    assert_problem(removed, 405, "method_not_allowed")
    assert removed.headers["allow"] == "GET, HEAD, PUT"
    assert_problem(client.post(api_server.url("/state"), headers=auth), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"expectedRevision": 0, "idleSeconds": NaN}', id="nan"),
        pytest.param(b'{"expectedRevision": 0, "idleSeconds": -Infinity}', id="infinity"),
        pytest.param(b"[" * 20_000 + b"]" * 20_000, id="nested"),
    ],
)
def test_what_python_would_read_but_json_is_not_is_refused(
    api_server: ApiServer, client: httpx.Client, body: bytes
) -> None:
    response = client.put(api_server.url(SETTINGS), content=body, headers=headers())
    assert_problem(response, 400, "malformed_json")
    assert_unchanged(api_server, client, 0)


def test_a_bad_page_position_never_reaches_the_store(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """``²`` is a digit to ``str.isdigit`` and not to ``int``: a 400, not a 500."""
    response = client.get(
        api_server.url("/settings/history?before=%C2%B2"),
        headers={"authorization": f"Bearer {VIEWER_TOKEN}"},
    )
    assert_problem(response, 400, "invalid_query")


def test_an_unreachable_store_is_503_and_the_server_keeps_running(
    client: httpx.Client,
) -> None:
    """R-SET-4: the store down at start does not stop the process; the API says so."""
    # A port held bound but never listening: connections to it are refused, and no
    # other process can start listening there while the test runs.
    dead_port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    dead_port.bind(("127.0.0.1", 0))
    dead = f"postgresql://postgres@127.0.0.1:{dead_port.getsockname()[1]}/nothing"

    def make(environment: SchedulerSettings) -> SettingsStore:
        return PostgresSettingsStore(dead, environment=environment)

    server = ApiServer(make, ENVIRONMENT)
    try:
        server.start()
        auth = {"authorization": f"Bearer {OPERATOR_TOKEN}"}
        answer = client.get(server.url(SETTINGS), headers=auth)
        problem = assert_problem(answer, 503, "storage_unavailable")
        assert answer.headers["retry-after"] == "10"
        assert "cannot" in problem["detail"]
        write = client.put(
            server.url(SETTINGS), json={"expectedRevision": 0, "sessions": 4}, headers=headers()
        )
        assert_problem(write, 503, "storage_unavailable")
        assert client.get(server.url("/state"), headers=auth).status_code == 200
    finally:
        server.stop()
        dead_port.close()
