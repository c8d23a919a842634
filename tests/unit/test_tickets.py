"""Queue tickets (R-TICKET-1..3)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched._tickets import (
    TICKET_FUTURE_SKEW_MS,
    TICKET_MAX_AGE_MS,
    TICKET_MAX_LENGTH,
    TicketSigner,
    generate_key,
)

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
SESSION = b"alice\x00objects/release-2.4.iso\x00dl-7f3a"
OTHER_SESSION = b"alice\x00objects/release-2.4.iso\x00dl-9c21"
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z in milliseconds
MINUTE = 60_000


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
        if value == 0:
            return out


def _forge(key: bytes, session_key: bytes, arrival: str, issued: str, version: str = "2") -> str:
    """A ticket signed as documented, computed without the module under test."""
    derived = hmac.new(key, b"arkvory.download-ticket.v2", hashlib.sha256).digest()
    value = f"{hashlib.sha256(session_key).hexdigest()}.{arrival}.{issued}".encode()
    digest = hmac.new(derived, value, hashlib.sha256).digest()
    signature = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return f"{version}.{arrival}.{issued}.{signature}"


@pytest.fixture
def signer() -> TicketSigner:
    return TicketSigner([KEY])


# --- format --------------------------------------------------------------------------------


def test_format_is_version_two_base36_times_and_an_hmac(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, NOW - 5 * MINUTE, NOW)
    version, arrival, issued, signature = ticket.split(".")
    assert version == "2"
    assert int(arrival, 36) == NOW - 5 * MINUTE
    assert int(issued, 36) == NOW
    assert arrival == arrival.lower()
    assert len(signature) == 43
    assert ticket == _forge(KEY, SESSION, arrival, issued)


def test_session_key_is_not_in_the_ticket(signer: TicketSigner) -> None:
    ticket = signer.issue(b"secret-principal-name", NOW, NOW)
    assert "secret" not in ticket
    assert b"secret" not in base64.urlsafe_b64decode(ticket.split(".")[3] + "=")


def test_zero_times_are_allowed(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, 0, 0)
    assert ticket.startswith("2.0.0.")
    assert signer.verify(ticket, SESSION, 0) == 0


def test_a_valid_ticket_returns_its_arrival(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, NOW - 3 * MINUTE, NOW - MINUTE)
    assert signer.verify(ticket, SESSION, NOW) == NOW - 3 * MINUTE


# --- R-TICKET-2 ----------------------------------------------------------------------------


def test_ticket_cannot_move_to_another_download(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, NOW - MINUTE, NOW)
    assert signer.verify(ticket, OTHER_SESSION, NOW) is None


def test_ticket_cannot_be_moved_earlier(signer: TicketSigner) -> None:
    arrival = NOW - MINUTE
    ticket = signer.issue(SESSION, arrival, NOW)
    version, _, issued, signature = ticket.split(".")
    earlier = ".".join([version, _base36(arrival - 3_600_000), issued, signature])
    assert signer.verify(earlier, SESSION, NOW) is None


def test_issue_time_cannot_be_refreshed_by_editing(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, NOW - 20 * MINUTE, NOW - 20 * MINUTE)
    version, arrival, _, signature = ticket.split(".")
    refreshed = ".".join([version, arrival, _base36(NOW), signature])
    assert signer.verify(refreshed, SESSION, NOW) is None


def test_ticket_expires_fifteen_minutes_after_issue(signer: TicketSigner) -> None:
    issued = NOW - TICKET_MAX_AGE_MS
    ticket = signer.issue(SESSION, issued - MINUTE, issued)
    assert TICKET_MAX_AGE_MS == 15 * MINUTE
    assert signer.verify(ticket, SESSION, NOW) == issued - MINUTE
    assert signer.verify(ticket, SESSION, NOW + 1) is None


def test_reissue_keeps_the_arrival_for_a_wait_longer_than_a_day(signer: TicketSigner) -> None:
    arrival = NOW
    ticket = signer.issue(SESSION, arrival, arrival)
    for now in range(NOW, NOW + 26 * 60 * MINUTE, 10 * MINUTE):
        verified = signer.verify(ticket, SESSION, now)
        assert verified == arrival
        ticket = signer.issue(SESSION, verified, now)


# --- R-TICKET-3 ----------------------------------------------------------------------------


def test_issue_time_two_minutes_ahead_counts_as_now(signer: TicketSigner) -> None:
    assert TICKET_FUTURE_SKEW_MS == 2 * MINUTE
    issued = NOW + TICKET_FUTURE_SKEW_MS  # issued by a node whose clock runs fast
    ticket = signer.issue(SESSION, issued - MINUTE, issued)
    assert signer.verify(ticket, SESSION, NOW) == issued - MINUTE
    # Its age counts from the issue time once the local clock has caught up.
    assert signer.verify(ticket, SESSION, issued + TICKET_MAX_AGE_MS) == issued - MINUTE
    assert signer.verify(ticket, SESSION, issued + TICKET_MAX_AGE_MS + 1) is None


def test_issue_time_further_ahead_is_rejected(signer: TicketSigner) -> None:
    issued = NOW + TICKET_FUTURE_SKEW_MS + 1
    ticket = signer.issue(SESSION, NOW, issued)
    assert signer.verify(ticket, SESSION, NOW) is None


def test_arrival_after_issue_is_rejected(signer: TicketSigner) -> None:
    with pytest.raises(ValueError, match="before its arrival"):
        signer.issue(SESSION, NOW + 1, NOW)
    # Even correctly signed, such a ticket is refused.
    forged = _forge(KEY, SESSION, _base36(NOW + 1), _base36(NOW))
    assert signer.verify(forged, SESSION, NOW) is None
    assert signer.verify(_forge(KEY, SESSION, _base36(NOW), _base36(NOW)), SESSION, NOW) == NOW


def test_old_format_one_is_ignored(signer: TicketSigner) -> None:
    arrival, issued = _base36(NOW - MINUTE), _base36(NOW)
    assert signer.verify(_forge(KEY, SESSION, arrival, issued, version="1"), SESSION, NOW) is None
    ticket = signer.issue(SESSION, NOW - MINUTE, NOW)
    assert signer.verify("1" + ticket[1:], SESSION, NOW) is None
    assert signer.verify("3" + ticket[1:], SESSION, NOW) is None
    assert signer.verify("02" + ticket[1:], SESSION, NOW) is None


# --- keys ----------------------------------------------------------------------------------


def test_rotated_key_still_verifies_and_new_key_signs() -> None:
    old_key, new_key = generate_key(), generate_key()
    before = TicketSigner([old_key]).issue(SESSION, NOW - MINUTE, NOW - MINUTE)
    rotated = TicketSigner([new_key, old_key])  # newest first
    assert rotated.verify(before, SESSION, NOW) == NOW - MINUTE
    after = rotated.issue(SESSION, NOW - MINUTE, NOW)
    assert TicketSigner([new_key]).verify(after, SESSION, NOW) == NOW - MINUTE
    assert TicketSigner([old_key]).verify(after, SESSION, NOW) is None


def test_unknown_key_is_rejected() -> None:
    ticket = TicketSigner([OTHER_KEY]).issue(SESSION, NOW, NOW)
    assert TicketSigner([KEY]).verify(ticket, SESSION, NOW) is None


def test_keys_are_required() -> None:
    with pytest.raises(ValueError, match="at least one"):
        TicketSigner([])
    with pytest.raises(ValueError, match="empty"):
        TicketSigner([KEY, b""])
    with pytest.raises(TypeError, match="sequence"):
        TicketSigner(KEY)  # type: ignore[arg-type]  # a lone key, not a list


def test_repr_does_not_show_keys() -> None:
    assert "kkkk" not in repr(TicketSigner([KEY]))


def test_generated_keys_are_32_random_bytes() -> None:
    first, second = generate_key(), generate_key()
    assert isinstance(first, bytes)
    assert len(first) == len(second) == 32
    assert first != second


def test_issue_rejects_negative_times(signer: TicketSigner) -> None:
    with pytest.raises(ValueError, match="negative"):
        signer.issue(SESSION, -1, NOW)


# --- malformed input -----------------------------------------------------------------------


def _valid() -> str:
    return TicketSigner([KEY]).issue(SESSION, NOW - MINUTE, NOW)


@pytest.mark.parametrize(
    "ticket",
    [
        None,
        "",
        "2",
        "2...",
        _valid() + ".x",  # a field too many
        _valid().rsplit(".", 1)[0],  # no signature
        _valid().upper(),
        _valid().replace(".", ". ", 1),
        "2.+" + _valid()[2:],
        "2.0" + _valid()[2:],  # leading zero: times have one spelling only
        _valid()[:-1] + "é",
        _valid() + "\n",
        "2." + "z" * (TICKET_MAX_LENGTH - 2),
        "2.1.1." + "A" * 300,
    ],
)
def test_malformed_tickets_are_ignored(signer: TicketSigner, ticket: str | None) -> None:
    assert signer.verify(ticket, SESSION, NOW) is None


def test_signature_has_a_single_spelling(signer: TicketSigner) -> None:
    ticket = signer.issue(SESSION, NOW - MINUTE, NOW)
    last = ticket[-1]
    # The final base64 character carries two padding bits the decoder ignores; the
    # next character of the alphabet differs only in those bits.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) + 1]
    assert base64.urlsafe_b64decode(ticket.split(".")[3] + "=") == base64.urlsafe_b64decode(
        ticket.split(".")[3][:-1] + twin + "="
    )
    assert signer.verify(ticket[:-1] + twin, SESSION, NOW) is None


def test_signature_never_contains_a_dot() -> None:
    signer = TicketSigner([generate_key()])
    for i in range(200):
        signature = signer.issue(i.to_bytes(2, "big"), i, NOW).split(".")[3]
        assert "." not in signature
        assert len(signature) == 43


def test_overlong_times_cannot_be_issued(signer: TicketSigner) -> None:
    with pytest.raises(ValueError, match="too large"):
        signer.issue(SESSION, 36**100, 36**100)


# --- properties ----------------------------------------------------------------------------


@given(st.text())
def test_verify_never_raises_on_arbitrary_text(text: str) -> None:
    signer = TicketSigner([KEY])
    assert signer.verify(text, SESSION, NOW) is None


@given(st.from_regex(r"2\.[0-9a-zA-Z+_ -]{0,14}\.[0-9a-z]{0,14}\.[A-Za-z0-9_=.-]{0,50}"))
def test_verify_never_raises_on_near_tickets(text: str) -> None:
    signer = TicketSigner([KEY])
    assert signer.verify(text, SESSION, NOW) is None


@given(
    st.binary(max_size=64),
    st.integers(0, 2**45),
    st.integers(0, 2**40),
    st.integers(-TICKET_FUTURE_SKEW_MS, TICKET_MAX_AGE_MS),
)
def test_round_trip_within_the_window(
    session_key: bytes, arrival: int, wait: int, age: int
) -> None:
    signer = TicketSigner([KEY])
    issued = arrival + wait
    now = issued + age
    ticket = signer.issue(session_key, arrival, issued)
    assert len(ticket) <= TICKET_MAX_LENGTH
    assert signer.verify(ticket, session_key, now) == arrival


@given(st.integers(0, 60), st.characters(codec="utf-8"))
def test_any_edit_invalidates(position: int, replacement: str) -> None:
    signer = TicketSigner([KEY])
    ticket = signer.issue(SESSION, NOW - MINUTE, NOW)
    position %= len(ticket)
    edited = ticket[:position] + replacement + ticket[position + 1 :]
    if edited != ticket:
        assert signer.verify(edited, SESSION, NOW) is None
