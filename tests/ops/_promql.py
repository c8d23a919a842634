"""What a PromQL expression reads: the series it selects and the labels it groups by.

The alerting rules and the dashboard name metrics and labels as strings, and nothing in
the library sees those strings: a renamed metric or label would leave a rule that never
fires and a panel that shows nothing. The tests compare what these expressions read
with what a real ``/metrics`` serves. That needs the selectors, not the meaning, so this
is a lexer with a little grammar (selectors, matchers, grouping clauses) rather than a
parser; promtool, which has the real parser, checks the syntax. An identifier it does
not know as a function or keyword is taken as a metric name, so a misspelt function
shows up as an unknown metric rather than passing unseen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["Reads", "Selector", "reads_of"]

AGGREGATIONS: Final = frozenset((
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
    "topk", "quantile",
))  # fmt: skip
FUNCTIONS: Final = frozenset((
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "exp", "floor", "histogram_count", "histogram_fraction",
    "histogram_quantile", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear",
    "present_over_time", "quantile_over_time", "rad", "rate", "resets", "round", "scalar",
    "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time",
    "sum_over_time", "tan", "tanh", "time", "timestamp", "vector", "year",
))  # fmt: skip
KEYWORDS: Final = frozenset((
    "and", "or", "unless", "bool", "offset", "inf", "nan",
))  # fmt: skip
GROUPING: Final = frozenset((
    "by", "without", "on", "ignoring", "group_left", "group_right",
))  # fmt: skip

_TOKEN: Final = re.compile(
    r"""
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
    |(?P<range>\[[^\]]*\])
    |(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>={}(),])
    |(?P<space>\s+)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Selector:
    """``metric{label op "value", ...}``: one series selector of an expression."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Reads:
    """Every selector of an expression, and every label its grouping clauses name."""

    selectors: tuple[Selector, ...]
    grouping: frozenset[str]

    @property
    def metrics(self) -> frozenset[str]:
        return frozenset(selector.metric for selector in self.selectors)


def reads_of(expression: str) -> Reads:
    """The selectors and grouping labels of one PromQL expression.

    Raises ``ValueError`` naming the spot for what the lexer cannot place (a selector
    without a metric name, an unclosed brace): such an expression is not checked.
    """
    tokens = list(_tokens(expression))
    selectors: list[Selector] = []
    grouping: set[str] = set()
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        index += 1
        if kind == "op" and text == "{":
            raise ValueError(f"a selector without a metric name in {expression!r}")
        if kind != "ident":
            continue
        if text in GROUPING:
            if index < len(tokens) and tokens[index] == ("op", "("):
                labels, index = _label_list(tokens, index + 1, expression)
                grouping.update(labels)
            continue
        if text in AGGREGATIONS or text in FUNCTIONS or text in KEYWORDS:
            continue
        matchers: tuple[tuple[str, str, str], ...] = ()
        if index < len(tokens) and tokens[index] == ("op", "{"):
            matchers, index = _matchers(tokens, index + 1, expression)
        selectors.append(Selector(text, matchers))
    return Reads(tuple(selectors), frozenset(grouping))


def _tokens(expression: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            raise ValueError(f"cannot read {expression[position:]!r} in {expression!r}")
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            yield kind, match.group()


def _label_list(
    tokens: list[tuple[str, str]], index: int, expression: str
) -> tuple[list[str], int]:
    """The labels of ``(a, b)`` from just after its ``(``; the index after ``)``."""
    labels: list[str] = []
    while index < len(tokens):
        kind, text = tokens[index]
        index += 1
        if (kind, text) == ("op", ")"):
            return labels, index
        if kind == "ident":
            labels.append(text)
        elif (kind, text) != ("op", ","):
            raise ValueError(f"unexpected {text!r} in a label list of {expression!r}")
    raise ValueError(f"an unclosed label list in {expression!r}")


def _matchers(
    tokens: list[tuple[str, str]], index: int, expression: str
) -> tuple[tuple[tuple[str, str, str], ...], int]:
    """The matchers of ``{a="x", b=~"y"}`` from just after its ``{``; the index after ``}``."""
    found: list[tuple[str, str, str]] = []
    while index < len(tokens):
        kind, text = tokens[index]
        if (kind, text) == ("op", "}"):
            return tuple(found), index + 1
        if (kind, text) == ("op", ","):
            index += 1
            continue
        if kind != "ident" or index + 2 >= len(tokens):
            raise ValueError(f"unexpected {text!r} in a selector of {expression!r}")
        (op_kind, op), (value_kind, value) = tokens[index + 1], tokens[index + 2]
        if op_kind != "op" or op not in {"=", "!=", "=~", "!~"} or value_kind != "string":
            raise ValueError(f"a matcher of {text!r} that is not label op string: {expression!r}")
        found.append((text, op, value[1:-1]))
        index += 3
    raise ValueError(f"an unclosed selector in {expression!r}")
