"""Parsing of the HTTP ``Range`` request header (RFC 9110 §14, ``bytes`` unit)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched._model import ByteRange, RangeKind
from arkvory_sched.asgi import _ranges
from arkvory_sched.asgi._ranges import (
    MAX_HEADER_LENGTH,
    MAX_RANGES,
    RangeParse,
    Satisfiable,
    Unsatisfiable,
    WholeObject,
    coalesce,
    content_range,
    first_range,
    parse_range,
)

BOUNDED, OPEN, SUFFIX = RangeKind.BOUNDED, RangeKind.OPEN, RangeKind.SUFFIX


def _ranges_of(result: RangeParse) -> tuple[ByteRange, ...]:
    assert isinstance(result, Satisfiable), result
    return result.ranges


def _assert_well_formed(result: RangeParse, size: int) -> None:
    if isinstance(result, Satisfiable):
        assert result.ranges
        for byte_range in result.ranges:
            assert 0 <= byte_range.start < byte_range.end <= size
            assert byte_range.kind in {BOUNDED, OPEN, SUFFIX}
    elif isinstance(result, Unsatisfiable):
        assert result.size == size
    else:
        assert isinstance(result, WholeObject)


# --- examples: what each form selects ---------------------------------------------------


def test_missing_header_serves_whole_object() -> None:
    assert parse_range(None, 100) == WholeObject()
    assert parse_range(None, 0) == WholeObject()


def test_open_range_reads_to_the_end() -> None:
    assert _ranges_of(parse_range("bytes=10-", 100)) == (ByteRange(10, 100, OPEN),)
    assert _ranges_of(parse_range("bytes=0-", 100)) == (ByteRange(0, 100, OPEN),)
    assert _ranges_of(parse_range("bytes=99-", 100)) == (ByteRange(99, 100, OPEN),)


def test_bounded_range_includes_its_last_pos() -> None:
    assert _ranges_of(parse_range("bytes=10-19", 100)) == (ByteRange(10, 20, BOUNDED),)
    assert _ranges_of(parse_range("bytes=5-5", 100)) == (ByteRange(5, 6, BOUNDED),)


def test_bounded_range_is_clamped_to_the_last_byte() -> None:
    assert _ranges_of(parse_range("bytes=90-150", 100)) == (ByteRange(90, 100, BOUNDED),)
    assert _ranges_of(parse_range("bytes=90-100", 100)) == (ByteRange(90, 100, BOUNDED),)


def test_bounded_range_over_the_whole_object_stays_bounded() -> None:
    (whole,) = _ranges_of(parse_range("bytes=0-99", 100))
    assert whole == ByteRange(0, 100, BOUNDED)
    assert not whole.is_tail_read(100)


def test_bounded_range_to_the_last_byte_is_a_tail_read() -> None:
    (tail,) = _ranges_of(parse_range("bytes=80-99", 100))
    assert tail == ByteRange(80, 100, BOUNDED)
    assert tail.is_tail_read(100)
    (resumed,) = _ranges_of(parse_range("bytes=80-", 100))
    assert not resumed.is_tail_read(100)


def test_suffix_range_reads_the_tail() -> None:
    (tail,) = _ranges_of(parse_range("bytes=-10", 100))
    assert tail == ByteRange(90, 100, SUFFIX)
    assert tail.is_tail_read(100)


def test_suffix_longer_than_object_selects_all_of_it() -> None:
    assert _ranges_of(parse_range("bytes=-100", 100)) == (ByteRange(0, 100, SUFFIX),)
    assert _ranges_of(parse_range("bytes=-500", 100)) == (ByteRange(0, 100, SUFFIX),)


def test_zero_suffix_is_unsatisfiable() -> None:
    assert parse_range("bytes=-0", 100) == Unsatisfiable(100)
    assert parse_range("bytes=-000", 100) == Unsatisfiable(100)
    assert _ranges_of(parse_range("bytes=-0,0-0", 100)) == (ByteRange(0, 1, BOUNDED),)


def test_start_beyond_size_is_unsatisfiable() -> None:
    assert parse_range("bytes=100-", 100) == Unsatisfiable(100)
    assert parse_range("bytes=100-200", 100) == Unsatisfiable(100)
    assert parse_range("bytes=500-", 100) == Unsatisfiable(100)
    assert parse_range("bytes=100-,200-300,-0", 100) == Unsatisfiable(100)


def test_unsatisfiable_specs_are_dropped_and_the_rest_served() -> None:
    result = parse_range("bytes=200-300, 0-9, -0, 150-", 100)
    assert _ranges_of(result) == (ByteRange(0, 10, BOUNDED),)


def test_ranges_keep_request_order_and_overlaps() -> None:
    result = parse_range("bytes=50-59,-5,0-,50-59", 100)
    assert _ranges_of(result) == (
        ByteRange(50, 60, BOUNDED),
        ByteRange(95, 100, SUFFIX),
        ByteRange(0, 100, OPEN),
        ByteRange(50, 60, BOUNDED),
    )


def test_leading_zeros_are_decimal() -> None:
    assert _ranges_of(parse_range("bytes=0010-0019", 100)) == (ByteRange(10, 20, BOUNDED),)
    assert _ranges_of(parse_range("bytes=-010", 100)) == (ByteRange(90, 100, SUFFIX),)
    assert _ranges_of(parse_range("bytes=00-00", 100)) == (ByteRange(0, 1, BOUNDED),)


def test_empty_object_with_valid_range_is_unsatisfiable() -> None:
    for header in ("bytes=0-", "bytes=0-0", "bytes=-5", "bytes=-0", "bytes=0-,-1"):
        assert parse_range(header, 0) == Unsatisfiable(0), header


def test_invalid_header_on_empty_object_is_ignored() -> None:
    assert parse_range("bytes=5-1", 0) == WholeObject()
    assert parse_range("pages=0-", 0) == WholeObject()


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        parse_range("bytes=0-", -1)


# --- examples: what is ignored ----------------------------------------------------------


def test_reversed_range_is_ignored() -> None:
    assert parse_range("bytes=20-10", 100) == WholeObject()
    # One invalid spec invalidates the whole header, wherever it is.
    assert parse_range("bytes=0-9,20-10", 100) == WholeObject()
    assert parse_range("bytes=20-10,0-9", 100) == WholeObject()
    # Even when the object is smaller than both positions.
    assert parse_range("bytes=500-400", 100) == WholeObject()
    assert parse_range("bytes=0500-400", 100) == WholeObject()
    assert _ranges_of(parse_range("bytes=0400-500", 1000)) == (ByteRange(400, 501, BOUNDED),)


def test_unit_is_case_insensitive() -> None:
    for unit in ("bytes", "BYTES", "Bytes", "bYtEs"):
        assert _ranges_of(parse_range(f"{unit}=0-0", 10)) == (ByteRange(0, 1, BOUNDED),)


def test_unknown_unit_is_ignored() -> None:
    for header in ("items=0-1", "byte=0-1", "bytess=0-1", "=0-1", "0-1", "bytes", "bytes:0-1"):
        assert parse_range(header, 10) == WholeObject(), header
    # "ſ" (long s) and the Kelvin sign fold to ASCII letters; the unit is ASCII only.
    assert parse_range("byteſ=0-1", 10) == WholeObject()
    assert parse_range("\u212aytes=0-1", 10) == WholeObject()


def test_whitespace_around_equals_is_invalid() -> None:
    for header in ("bytes =0-1", "bytes\t=0-1", "by tes=0-1"):
        assert parse_range(header, 10) == WholeObject(), header


def test_whitespace_around_specs_is_tolerated() -> None:
    expected = (ByteRange(0, 2, BOUNDED), ByteRange(5, 10, OPEN), ByteRange(7, 10, SUFFIX))
    for header in (
        "bytes=0-1,5-,-3",
        "bytes= 0-1 , 5- ,\t-3\t",
        "bytes=\t 0-1,  5-  ,-3 ",
        " bytes=0-1,5-,-3 ",
    ):
        assert _ranges_of(parse_range(header, 10)) == expected, header


def test_whitespace_inside_a_spec_is_invalid() -> None:
    for header in ("bytes=0 -1", "bytes=0- 1", "bytes=- 3", "bytes=1 0-", "bytes=0-1\n"):
        assert parse_range(header, 10) == WholeObject(), repr(header)


def test_empty_list_elements_are_tolerated() -> None:
    expected = (ByteRange(0, 2, BOUNDED), ByteRange(5, 10, OPEN))
    for header in ("bytes=,0-1,,5-,", "bytes=, ,0-1,\t,5-", "bytes=0-1,,,,,5-,,,"):
        assert _ranges_of(parse_range(header, 10)) == expected, header


def test_header_without_range_specs_is_ignored() -> None:
    for header in ("", "bytes=", "bytes=,", "bytes=,,", "bytes= , \t, ", "bytes= "):
        assert parse_range(header, 10) == WholeObject(), repr(header)


def test_malformed_specs_are_ignored() -> None:
    for spec in ("-", "--1", "1--2", "1-2-3", "a-b", "1-b", "x", "1", "1.5-2", "1e3-"):
        assert parse_range(f"bytes={spec}", 10_000) == WholeObject(), spec


def test_only_ascii_digits_are_numbers() -> None:
    for spec in (
        "+1-2",
        "1-+2",
        "-+3",
        "--3",
        "-\u22123",  # minus sign
        "0x10-",
        "0x1F-0x2F",
        "\u00b2-",  # superscript two: str.isdigit() is True
        "\u0663-",  # Arabic-Indic three
        "1-\u0663",
        "-\uff13",  # fullwidth three
        "\U0001d7d9-",  # mathematical double-struck one
    ):
        assert parse_range(f"bytes={spec}", 10_000) == WholeObject(), repr(spec)


def test_more_than_max_ranges_is_ignored() -> None:
    specs = [f"{i}-{i}" for i in range(MAX_RANGES + 1)]
    assert parse_range("bytes=" + ",".join(specs), 1000) == WholeObject()
    # Unsatisfiable specs count too: the cap is on the work a header asks for.
    many_misses = ",".join(["5000-"] * MAX_RANGES + ["0-0"])
    assert parse_range("bytes=" + many_misses, 1000) == WholeObject()


def test_max_ranges_are_accepted_and_empty_elements_do_not_count() -> None:
    specs = [f"{i}-{i}" for i in range(MAX_RANGES)]
    result = parse_range("bytes=" + ",,".join(specs) + ",,,", 1000)
    assert len(_ranges_of(result)) == MAX_RANGES


def test_header_longer_than_max_length_is_ignored() -> None:
    prefix = "bytes=0-0"
    at_limit = prefix + " " * (MAX_HEADER_LENGTH - len(prefix))
    assert len(at_limit) == MAX_HEADER_LENGTH
    assert _ranges_of(parse_range(at_limit, 10)) == (ByteRange(0, 1, BOUNDED),)
    assert parse_range(at_limit + " ", 10) == WholeObject()


def test_huge_digit_strings_do_not_overflow_or_slow() -> None:
    size = 10**15
    huge = "9" * 4000
    assert parse_range(f"bytes={huge}-", size) == Unsatisfiable(size)
    half = "9" * 2000
    assert parse_range(f"bytes={half}-{half}", size) == Unsatisfiable(size)
    assert _ranges_of(parse_range(f"bytes=0-{huge}", size)) == (ByteRange(0, size, BOUNDED),)
    assert _ranges_of(parse_range(f"bytes=-{huge}", size)) == (ByteRange(0, size, SUFFIX),)
    # Leading zeros do not make a number large.
    zeros = "0" * 4000
    assert _ranges_of(parse_range(f"bytes={zeros}5-", size)) == (ByteRange(5, size, OPEN),)
    assert parse_range(f"bytes=-{zeros}", size) == Unsatisfiable(size)
    # Two huge numbers are still ordered exactly, past any fixed precision.
    first, last = "1" + "0" * 2000, "9" * 2000
    assert parse_range(f"bytes={first}-{last}", size) == WholeObject()
    assert parse_range(f"bytes={last}-{first}", size) == Unsatisfiable(size)
    # A header that is one number up to the length limit, on a one-byte object.
    longest = "bytes=-" + "1" * (MAX_HEADER_LENGTH - len("bytes=-"))
    assert parse_range(longest, 1) == Satisfiable((ByteRange(0, 1, SUFFIX),))


def test_int_sees_at_most_as_many_digits_as_the_size(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def counting_int(text: str) -> int:
        seen.append(text)
        return int(text)

    monkeypatch.setattr(_ranges, "int", counting_int, raising=False)
    size = 10**15
    headers = [
        "bytes=" + "9" * 3000 + "-",
        "bytes=0-" + "9" * 3000,
        "bytes=-" + "9" * 3000,
        "bytes=" + "0" * 3000 + "12-" + "0" * 1000 + "34",
        "bytes=" + "1" * 1000 + "-" + "2" * 1000,
        "bytes=" + "9" * 17 + "-",
        "bytes=0-" + "9" * 24 + ",-" + "9" * 20,
    ]
    for header in headers:
        parse_range(header, size)
    assert seen  # the small numbers do go through int()
    # The general parser converts no more digits than the size has; the one-range fast
    # path converts at most its regex's 18 (a bounded cost, below 2**63).
    assert max(len(text) for text in seen) <= max(len(str(size)), 18)


def test_comma_flood_completes() -> None:
    flood = "bytes=" + "," * 2000
    assert parse_range(flood, 100) == WholeObject()
    assert _ranges_of(parse_range(flood + "0-0" + "," * 2000, 100)) == (ByteRange(0, 1),)
    spaced = "bytes=" + " ," * 2000
    assert len(spaced) <= MAX_HEADER_LENGTH
    assert parse_range(spaced, 100) == WholeObject()


def test_oversized_header_is_ignored_without_parsing() -> None:
    header = "bytes=" + "0-0," * 25_000
    assert len(header) > 100_000
    assert parse_range(header, 100) == WholeObject()


# --- content_range and Unsatisfiable ----------------------------------------------------


def test_content_range_is_inclusive() -> None:
    assert content_range(ByteRange(0, 100), 100) == "bytes 0-99/100"
    assert content_range(ByteRange(90, 100, SUFFIX), 100) == "bytes 90-99/100"
    assert content_range(ByteRange(5, 6), 100) == "bytes 5-5/100"


def test_content_range_rejects_a_range_beyond_the_size() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        content_range(ByteRange(0, 101), 100)


def test_unsatisfiable_content_range_names_the_size() -> None:
    assert Unsatisfiable(100).content_range == "bytes */100"
    assert Unsatisfiable(0).content_range == "bytes */0"


def test_satisfiable_needs_a_range() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Satisfiable(())


# --- coalesce examples ------------------------------------------------------------------


def test_coalesce_merges_overlapping_and_adjacent_ranges() -> None:
    ranges = [ByteRange(50, 60), ByteRange(0, 10), ByteRange(10, 20), ByteRange(55, 70)]
    assert coalesce(ranges) == (ByteRange(0, 20, BOUNDED), ByteRange(50, 70, BOUNDED))


def test_coalesce_keeps_the_kind_of_an_unmerged_range() -> None:
    ranges = [ByteRange(90, 100, SUFFIX), ByteRange(0, 10, OPEN), ByteRange(20, 30)]
    assert coalesce(ranges) == (
        ByteRange(0, 10, OPEN),
        ByteRange(20, 30, BOUNDED),
        ByteRange(90, 100, SUFFIX),
    )


def test_coalesce_makes_merged_ranges_bounded() -> None:
    assert coalesce([ByteRange(90, 100, SUFFIX), ByteRange(95, 100, SUFFIX)]) == (
        ByteRange(90, 100, BOUNDED),
    )
    assert coalesce([ByteRange(0, 100, OPEN), ByteRange(0, 100, OPEN)]) == (
        ByteRange(0, 100, BOUNDED),
    )


def test_coalesce_of_nothing_is_nothing() -> None:
    assert coalesce([]) == ()


# --- properties: never raises -----------------------------------------------------------

sizes = st.integers(0, 10**15)

_fragments = st.one_of(
    st.text(alphabet="0123456789", min_size=1, max_size=40),
    st.sampled_from(
        [
            "-",
            ",",
            ",,",
            " ",
            "\t",
            "+",
            "0x",
            "=",
            "\u00b2",
            "\u0663",
            "\u2212",
            "\n",
            "bytes=",
            "9" * 300,
            "0" * 300,
        ]
    ),
    st.text(max_size=3),
)

_grammarish = st.builds(
    lambda unit, equals, parts: unit + equals + "".join(parts),
    st.sampled_from(["bytes", "BYTES", "Bytes", "bytes ", " bytes", "items", "", "byteſ"]),
    st.sampled_from(["=", " =", "= ", ""]),
    st.lists(_fragments, max_size=40),
)


@given(st.one_of(st.none(), st.text(), _grammarish), sizes)
def test_parse_range_never_raises(header: str | None, size: int) -> None:
    _assert_well_formed(parse_range(header, size), size)


def _first_of(result: RangeParse) -> ByteRange | Unsatisfiable | None:
    if isinstance(result, Satisfiable):
        return result.ranges[0]
    return result if isinstance(result, Unsatisfiable) else None


@given(st.one_of(st.text(), _grammarish, st.sampled_from(["bytes=0-", "bytes=5-2"])), sizes)
def test_first_range_is_the_first_of_parse_range(header: str, size: int) -> None:
    assert first_range(header, size) == _first_of(parse_range(header, size))


def test_first_range_of_the_simple_forms() -> None:
    assert first_range("bytes=10-19", 100) == ByteRange(10, 20, BOUNDED)
    assert first_range("bytes=90-", 100) == ByteRange(90, 100, OPEN)
    assert first_range("bytes=100-", 100) == Unsatisfiable(100)
    assert first_range("bytes=19-10", 100) is None
    assert first_range("bytes=1-2," * 2000, 100) is None  # over MAX_HEADER_LENGTH
    with pytest.raises(ValueError, match="size"):
        first_range("bytes=0-", -1)


# --- properties: against a byte model ---------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """One generated range spec: ``first`` is None for a suffix, ``last`` for an open one."""

    first: int | None
    last: int | None
    text: str


_small_or_huge = st.one_of(
    st.integers(0, 80), st.integers(0, 80), st.integers(0, 80), st.integers(0, 10**40)
)
_padding = st.sampled_from(["", "", " ", "\t", " \t "])


@st.composite
def _number(draw: st.DrawFn, value: int) -> str:
    return "0" * draw(st.integers(0, 3)) + str(value)


@st.composite
def _valid_spec(draw: st.DrawFn) -> _Spec:
    form = draw(st.sampled_from(["bounded", "open", "suffix"]))
    first = draw(_small_or_huge)
    if form == "suffix":
        return _Spec(None, first, "-" + draw(_number(first)))
    if form == "open":
        return _Spec(first, None, draw(_number(first)) + "-")
    last = first + draw(_small_or_huge)
    return _Spec(first, last, draw(_number(first)) + "-" + draw(_number(last)))


@st.composite
def _reversed_spec(draw: st.DrawFn) -> str:
    last = draw(_small_or_huge)
    first = last + draw(st.integers(1, 10**40))
    return draw(_number(first)) + "-" + draw(_number(last))


@st.composite
def _range_set(draw: st.DrawFn, specs: list[str]) -> str:
    """Join specs the way a list may be written: OWS around them, empty elements."""
    elements: list[str] = []
    for spec in specs:
        elements.extend(draw(_padding) for _ in range(draw(st.integers(0, 1))))
        elements.append(draw(_padding) + spec + draw(_padding))
    elements.extend(draw(_padding) for _ in range(draw(st.integers(0, 1))))
    unit = draw(st.sampled_from(["bytes", "BYTES", "Bytes"]))
    return unit + "=" + ",".join(elements)


def _reference(specs: list[_Spec], size: int) -> list[tuple[set[int], RangeKind]]:
    """The bytes each spec selects, in request order, leaving out those that select none."""
    selected: list[tuple[set[int], RangeKind]] = []
    for spec in specs:
        if spec.first is None:
            assert spec.last is not None
            suffix = spec.last
            covered = {offset for offset in range(size) if size - offset <= suffix}
            kind = SUFFIX
        elif spec.last is None:
            covered = {offset for offset in range(size) if offset >= spec.first}
            kind = OPEN
        else:
            covered = {offset for offset in range(size) if spec.first <= offset <= spec.last}
            kind = BOUNDED
        if covered:
            selected.append((covered, kind))
    return selected


@given(st.lists(_valid_spec(), min_size=1, max_size=MAX_RANGES), st.integers(0, 64), st.data())
def test_selected_bytes_match_the_byte_model(
    specs: list[_Spec], size: int, data: st.DataObject
) -> None:
    header = data.draw(_range_set([spec.text for spec in specs]))
    result = parse_range(header, size)
    _assert_well_formed(result, size)
    expected = _reference(specs, size)
    if not expected:
        assert result == Unsatisfiable(size)
        return
    ranges = _ranges_of(result)
    assert [(set(range(r.start, r.end)), r.kind) for r in ranges] == expected
    union = {offset for r in ranges for offset in range(r.start, r.end)}
    assert union == set().union(*(covered for covered, _ in expected))


@given(
    st.lists(_valid_spec(), max_size=MAX_RANGES - 1),
    _reversed_spec(),
    st.integers(0, 64),
    st.data(),
)
def test_any_reversed_spec_invalidates_the_header(
    specs: list[_Spec], reversed_spec: str, size: int, data: st.DataObject
) -> None:
    texts = [spec.text for spec in specs]
    texts.insert(data.draw(st.integers(0, len(texts))), reversed_spec)
    assert parse_range(data.draw(_range_set(texts)), size) == WholeObject()


@given(
    st.lists(_valid_spec(), min_size=MAX_RANGES + 1, max_size=MAX_RANGES + 5),
    st.integers(0, 64),
    st.data(),
)
def test_too_many_specs_invalidate_the_header(
    specs: list[_Spec], size: int, data: st.DataObject
) -> None:
    header = data.draw(_range_set([spec.text for spec in specs]))
    if len(header) <= MAX_HEADER_LENGTH:
        assert parse_range(header, size) == WholeObject()


# --- properties: coalesce ---------------------------------------------------------------

_byte_ranges = st.builds(
    lambda start, length, kind: ByteRange(start, start + length, kind),
    st.integers(0, 100),
    st.integers(1, 30),
    st.sampled_from([BOUNDED, OPEN, SUFFIX, RangeKind.FULL]),
)


@given(st.lists(_byte_ranges, max_size=20))
def test_coalesce_is_sorted_disjoint_and_covers_the_union(ranges: list[ByteRange]) -> None:
    merged = coalesce(ranges)
    for left, right in pairwise(merged):
        assert left.end < right.start  # sorted, disjoint and not even adjacent
    covered = {offset for r in merged for offset in range(r.start, r.end)}
    assert covered == {offset for r in ranges for offset in range(r.start, r.end)}
    for out in merged:
        inside = [r for r in ranges if out.start <= r.start and r.end <= out.end]
        if len(inside) == 1:
            assert out == inside[0]  # kind included
        else:
            assert out.kind is BOUNDED
    assert coalesce(merged) == merged


_DIGITS = st.text(alphabet="0123456789", min_size=0, max_size=20)


@given(first=_DIGITS, last=_DIGITS, size=st.integers(min_value=0, max_value=2**62))
def test_the_single_range_fast_path_reads_as_the_general_parser(
    first: str, last: str, size: int
) -> None:
    """``bytes=first-last`` (the form nearly every client sends) takes a regex fast path;
    it must answer exactly as the spec-by-spec parser, leading zeros, reversed, clamped,
    beyond the object and too-long numbers included."""
    header = f"bytes={first}-{last}"
    assert parse_range(header, size) == _ranges._parse_general(header, size)


@pytest.mark.parametrize(
    "header",
    ["bytes=0-99", "bytes=5-", "bytes=000-0009", "bytes=99-5", "bytes=100-", "bytes=0-" + "9" * 18],
)
def test_the_fast_path_takes_the_simple_form(header: str) -> None:
    assert _ranges._SIMPLE_RANGE.fullmatch(header) is not None
    assert parse_range(header, 100) == _ranges._parse_general(header, 100)


@given(st.lists(_valid_spec(), min_size=1, max_size=MAX_RANGES), st.integers(0, 64), st.data())
def test_first_range_of_valid_sets(specs: list[_Spec], size: int, data: st.DataObject) -> None:
    header = data.draw(_range_set([spec.text for spec in specs]))
    assert first_range(header, size) == _first_of(parse_range(header, size))
