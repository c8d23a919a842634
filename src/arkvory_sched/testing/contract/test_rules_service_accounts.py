"""Operator-set classes of service accounts and links (R-CLASS-6), on every implementation.

The operator's listing replaces the class the host's resolver gives and the default of
the principal's kind; a client header may still only lower it; people are never listed;
a change applies from the next admission.
"""

from __future__ import annotations

import dataclasses

import pytest

from arkvory_sched import DownloadClass, PrincipalKind
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, deliver, queued

pytestmark = pytest.mark.anyio

LISTED = {"nightly-mirror": "bulk", "share-link-7": "background"}


async def test_a_listed_service_account_is_admitted_in_its_class(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(service_account_classes=LISTED))
    mirror = await admitted(scheduler, big("nightly-mirror", "dl-m"))
    assert mirror.download_class is DownloadClass.BULK
    link = await admitted(
        scheduler, big("share-link-7", "dl-l", kind=PrincipalKind.LINK, object_id="b.iso")
    )
    assert link.download_class is DownloadClass.BACKGROUND
    for decision in (mirror, link):
        await deliver(scheduler, decision)


async def test_an_unlisted_principal_gets_the_default_of_its_kind(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(service_account_classes=LISTED))
    agent = await admitted(scheduler, big("ci-bot", "dl-a"))
    assert agent.download_class is DownloadClass.RELEASE
    person = await admitted(scheduler, big("ann", "dl-p", kind=PrincipalKind.PERSON))
    assert person.download_class is DownloadClass.INTERACTIVE
    for decision in (agent, person):
        await deliver(scheduler, decision)


async def test_a_person_is_never_moved_by_the_listing(make_scheduler: MakeScheduler) -> None:
    """People's classes are the host's business: a person named like a listed account
    keeps ``interactive``."""
    scheduler = await make_scheduler(contract_settings(service_account_classes=LISTED))
    person = await admitted(scheduler, big("nightly-mirror", "dl-p", kind=PrincipalKind.PERSON))
    assert person.download_class is DownloadClass.INTERACTIVE
    await deliver(scheduler, person)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param("background", DownloadClass.BACKGROUND, id="lowered"),
        pytest.param("release", DownloadClass.BULK, id="not-raised"),
        pytest.param("interactive", DownloadClass.BULK, id="not-raised-to-people"),
    ],
)
async def test_a_header_may_only_lower_the_listed_class(
    make_scheduler: MakeScheduler, header: str, expected: DownloadClass
) -> None:
    scheduler = await make_scheduler(contract_settings(service_account_classes=LISTED))
    decision = await admitted(scheduler, big("nightly-mirror", "dl-m", requested_class=header))
    assert decision.download_class is expected
    await deliver(scheduler, decision)


async def test_the_listing_replaces_the_class_the_host_gave(
    make_scheduler: MakeScheduler,
) -> None:
    """The host's resolver may say ``release``; the operator's stored policy wins."""
    scheduler = await make_scheduler(contract_settings(service_account_classes=LISTED))
    request = big("nightly-mirror", "dl-m")
    request = dataclasses.replace(request, base_class=DownloadClass.RELEASE)
    decision = await admitted(scheduler, request)
    assert decision.download_class is DownloadClass.BULK
    await deliver(scheduler, decision)


async def test_a_change_applies_from_the_next_admission(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Moving an account to ``bulk`` changes its next session; the running one keeps its
    class and its slot."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=2))
    running = await admitted(scheduler, big("nightly-mirror", "dl-1"))
    assert running.download_class is DownloadClass.RELEASE
    await scheduler.configure(
        scheduler.settings.with_changes(service_account_classes={"nightly-mirror": "bulk"})
    )
    following = await admitted(scheduler, big("nightly-mirror", "dl-2", object_id="c.iso"))
    assert following.download_class is DownloadClass.BULK
    assert (await scheduler.stats()).active == 2
    waiting = await queued(scheduler, big("nightly-mirror", "dl-3", object_id="d.iso"))
    assert waiting.download_class is DownloadClass.BULK
    for decision in (running, following):
        await deliver(scheduler, decision)
