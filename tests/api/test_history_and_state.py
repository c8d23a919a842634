"""The audit trail's pages and the queue state over HTTP (R-SET-5, R-VIS-2)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx

from arkvory_sched import Admitted, Delivered, DownloadRequest, PrincipalKind, Queued

from .conftest import OPERATOR_TOKEN, VIEWER_TOKEN, ApiServer, headers

MIB = 1024 * 1024


def get(api_server: ApiServer, client: httpx.Client, path: str, token: str = VIEWER_TOKEN) -> Any:
    response = client.get(
        api_server.url(path) if path.startswith("/") else path,
        headers={"authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return response


def test_history_pages_newest_first_until_the_end(
    api_server: ApiServer, client: httpx.Client
) -> None:
    for revision in range(5):
        body = {"expectedRevision": revision, "sessions": 4 + revision}
        assert client.put(api_server.url("/settings"), json=body, headers=headers()).is_success
    stale = {"expectedRevision": 1, "sessions": 20}
    assert client.put(api_server.url("/settings"), json=stale, headers=headers()).status_code == 409

    seen: list[dict[str, Any]] = []
    url: str | None = api_server.url("/settings/history?limit=2")
    pages = 0
    while url is not None:
        response = get(api_server, client, url)
        page = response.json()
        assert len(page["entries"]) <= 2
        seen += page["entries"]
        url = page["next"]
        if url is not None:
            assert response.headers["link"] == f'<{url}>; rel="next"'
        pages += 1
    assert pages == 3
    assert [entry["outcome"] for entry in seen] == ["revision_mismatch"] + ["applied"] * 5
    ids = [entry["id"] for entry in seen]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == 6
    assert [entry["revision"] for entry in seen[1:]] == [5, 4, 3, 2, 1]
    assert seen[1]["change"] == {"sessions": {"from": 7, "to": 8}}
    assert seen[-1]["change"] == {"sessions": {"from": None, "to": 4}}
    assert all(entry["actor"] == "olga" for entry in seen)
    assert datetime.fromisoformat(seen[0]["at"]).tzinfo is not None


def test_history_refuses_a_bad_page_size(api_server: ApiServer, client: httpx.Client) -> None:
    for query in ("limit=0", "limit=10000", "limit=two", "before=-1"):
        response = client.get(
            api_server.url(f"/settings/history?{query}"),
            headers={"authorization": f"Bearer {VIEWER_TOKEN}"},
        )
        assert response.status_code == 400, query
        problem = response.json()
        assert problem["reason"] == "invalid_query"
        assert problem["invalidParams"][0]["name"] == query.partition("=")[0]


def big(principal: str, download_id: str, **changes: Any) -> DownloadRequest:
    values: dict[str, Any] = {
        "principal": principal,
        "principal_kind": PrincipalKind.SERVICE,
        "object_id": f"{principal}/{download_id}.iso",
        "object_size": 64 * MIB,
        "download_id": download_id,
    }
    values.update(changes)
    return DownloadRequest(**values)


def test_the_state_shows_classes_forecast_reasons_and_sessions(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """Two slots, both held; a bulk class that only opens at night (never now: the
    window is the hour before this one), and a waiter in each of release and bulk."""
    now = datetime.now(UTC)
    hour = (now.hour - 1) % 24
    window = {
        "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        "start": f"{hour:02d}:00",
        "end": f"{hour:02d}:30",
        "zone": "UTC",
    }
    body = {
        "expectedRevision": 0,
        "sessions": 2,
        "classWindows": {"bulk": {"windows": [window]}},
    }
    assert client.put(api_server.url("/settings"), json=body, headers=headers()).is_success
    scheduler = api_server.scheduler
    assert scheduler is not None
    for request in (big("ci-bot", "a"), big("deployer", "b")):
        assert isinstance(api_server.call(scheduler.admit(request)), Admitted)
    assert isinstance(api_server.call(scheduler.admit(big("agent", "c"))), Queued)
    bulk = big("mirror", "d", requested_class="bulk")
    assert isinstance(api_server.call(scheduler.admit(bulk)), Queued)

    state = get(api_server, client, "/state", OPERATOR_TOKEN).json()
    assert (state["sessions"], state["active"], state["waiting"]) == (2, 2, 2)
    release, bulk_class = state["classes"]["release"], state["classes"]["bulk"]
    assert (release["active"], release["waiting"]) == (2, 1)
    assert release["waitingBytes"] == 64 * MIB
    assert release["remainingBytes"] == 128 * MIB
    assert release["notDraining"] == {"reason": "no_free_slot", "nextOpening": None}
    assert bulk_class["notDraining"]["reason"] == "outside_window"
    opening = datetime.fromisoformat(bulk_class["notDraining"]["nextOpening"])
    assert opening.minute == 0
    assert opening.hour == hour
    assert 22 * 3600 < (opening - now).total_seconds() <= 24 * 3600
    # The bulk waiter cannot start before its window: the forecast says so.
    assert state["forecast"]["emptiesAt"] is not None
    empties = datetime.fromisoformat(state["forecast"]["emptiesAt"])
    assert empties >= opening
    assert datetime.fromisoformat(bulk_class["emptiesAt"]) >= opening
    assert datetime.fromisoformat(release["emptiesAt"]) < opening
    assert state["classes"]["interactive"]["notDraining"] is None
    # A class with waiters has an oldest wait; one without has none (null, not 0 s).
    assert release["oldestWaitSeconds"] is not None and release["oldestWaitSeconds"] >= 0
    assert state["classes"]["interactive"]["oldestWaitSeconds"] is None
    assert state["estimateAccuracy"]["scored"] == 0
    assert state["estimateAccuracy"]["byClient"]["third_party"]["scored"] == 0
    # Both slots held: however many wait, no slot idles.
    assert state["idleSlots"]["slots"] == 0
    sessions = state["activeSessions"]
    assert sorted(s["principal"] for s in sessions) == ["ci-bot", "deployer"]
    assert all(s["class"] == "release" and s["bytesRemaining"] == 64 * MIB for s in sessions)

    viewer = get(api_server, client, "/state", VIEWER_TOKEN).json()
    assert "activeSessions" not in viewer
    assert viewer["classes"]["bulk"]["notDraining"]["reason"] == "outside_window"


def test_the_state_shows_idle_slots_and_the_accuracy_per_kind_of_client(
    api_server: ApiServer, client: httpx.Client
) -> None:
    """Issue #28. One slot: an SDK client and curl wait behind its holder, are told
    their starts; the holder finishes and the slot stays free 3 s until the SDK client
    comes. Its wait is scored as a protocol client's; curl has not started."""
    body = {"expectedRevision": 0, "sessions": 1}
    assert client.put(api_server.url("/settings"), json=body, headers=headers()).is_success
    scheduler = api_server.scheduler
    assert scheduler is not None
    holder = api_server.call(scheduler.admit(big("holder", "h")))
    assert isinstance(holder, Admitted)
    sdk = big("sdk-user", "s")
    curl = replace(big("curl-user", "c"), download_id=None, client_address="198.51.100.7")
    for waiter in (sdk, curl, sdk, curl):
        assert isinstance(api_server.call(scheduler.admit(waiter)), Queued)

    outcome = Delivered(holder.grant.byte_range)
    api_server.call(scheduler.report(holder.grant, outcome))
    api_server.clock.advance(3.0)
    state = get(api_server, client, "/state").json()
    assert state["idleSlots"] == {
        "slots": 1,
        "slotSeconds": 3.0,
        "stretchSeconds": 3.0,
        "longestStretchSeconds": 3.0,
    }

    api_server.call(scheduler.tick())
    assert isinstance(api_server.call(scheduler.admit(sdk)), Admitted)
    api_server.clock.advance(1.0)
    state = get(api_server, client, "/state").json()
    assert state["idleSlots"]["slots"] == 0
    assert state["idleSlots"]["slotSeconds"] == 3.0
    accuracy = state["estimateAccuracy"]
    assert accuracy["scored"] == 1
    assert set(accuracy["byClient"]) == {"protocol", "third_party"}
    assert accuracy["byClient"]["protocol"]["scored"] == 1
    assert accuracy["byClient"]["protocol"]["shareInsideInterval"] is not None
    assert accuracy["byClient"]["third_party"] == {
        "scored": 0,
        "relativeErrorP50": None,
        "relativeErrorP95": None,
        "shareInsideInterval": None,
    }
