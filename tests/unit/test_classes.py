"""Priority classes and how a request's class is chosen (R-CLASS-1, -2, -4)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched import (
    DownloadClass,
    InvalidRequestError,
    PrincipalKind,
    SchedulerSettings,
    applied_class,
    default_class,
)

ORDER = [
    DownloadClass.INTERACTIVE,
    DownloadClass.RELEASE,
    DownloadClass.BULK,
    DownloadClass.BACKGROUND,
]


# --- R-CLASS-1: the built-in classes ---------------------------------------------------------


def test_four_built_in_classes_most_urgent_first() -> None:
    assert list(DownloadClass) == ORDER
    assert [cls.value for cls in ORDER] == ["interactive", "release", "bulk", "background"]
    assert [cls.rank for cls in ORDER] == [0, 1, 2, 3]


@pytest.mark.parametrize("cls", ORDER)
def test_rank_round_trips(cls: DownloadClass) -> None:
    assert DownloadClass.by_rank(cls.rank) is cls


def test_default_weights_are_eight_four_two_one() -> None:
    settings = SchedulerSettings()
    assert [settings.weight_of(cls) for cls in ORDER] == [8, 4, 2, 1]


def test_reserve_for_interactive_only_from_four_slots() -> None:
    assert [SchedulerSettings(sessions=n).reserve for n in (1, 2, 3, 4, 16)] == [0, 0, 0, 1, 1]


# --- R-CLASS-2: safe defaults ------------------------------------------------------------------


def test_people_default_to_interactive() -> None:
    assert default_class(PrincipalKind.PERSON) is DownloadClass.INTERACTIVE


@pytest.mark.parametrize("kind", [PrincipalKind.SERVICE, PrincipalKind.LINK])
def test_service_accounts_and_links_default_to_release(kind: PrincipalKind) -> None:
    assert default_class(kind) is DownloadClass.RELEASE


# --- R-CLASS-4: a client may only lower its class ----------------------------------------------


@pytest.mark.parametrize("base", ORDER)
def test_no_header_keeps_the_base_class(base: DownloadClass) -> None:
    assert applied_class(base, None) is base


@pytest.mark.parametrize(("base", "asked"), list(itertools.product(ORDER, ORDER)))
def test_class_can_only_be_lowered(base: DownloadClass, asked: DownloadClass) -> None:
    applied = applied_class(base, asked.value)
    assert applied.rank == max(base.rank, asked.rank)
    assert applied is (asked if asked.rank > base.rank else base)


@pytest.mark.parametrize("header", ["BULK", " bulk", "Bulk\t", "bUlK "])
def test_class_header_ignores_case_and_surrounding_space(header: str) -> None:
    assert applied_class(DownloadClass.RELEASE, header) is DownloadClass.BULK


@pytest.mark.parametrize("header", ["", "urgent", "high", "inter active", "0", "bulk,background"])
def test_unknown_class_is_invalid_request(header: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        applied_class(DownloadClass.RELEASE, header)
    assert raised.value.field == "download_class"
    for cls in ORDER:
        assert cls.value in raised.value.message


def test_unknown_class_message_does_not_echo_a_long_value() -> None:
    with pytest.raises(InvalidRequestError) as raised:
        applied_class(DownloadClass.RELEASE, "x" * 10_000)
    assert len(raised.value.message) < 200


@given(st.text(max_size=30))
def test_any_header_value_is_a_class_no_higher_than_base_or_a_400(header: str) -> None:
    for base in ORDER:
        try:
            applied = applied_class(base, header)
        except InvalidRequestError as error:
            assert error.field == "download_class"
            assert header.strip().lower() not in {cls.value for cls in ORDER}
        else:
            assert applied.rank >= base.rank
