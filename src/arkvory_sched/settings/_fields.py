"""The one list of scheduler settings: for each field, its checks, rule, variable and docs.

Every setting appears once, in :data:`FIELDS`, as a :class:`SettingField` that says
everything the rest of the code needs to know about it: how a value is checked (and
against which earlier fields), the rule that derives it when unset, whether an operator
may change it at run time (R-SET-1) and under which camelCase name, its environment
variable and how that variable's text is parsed, and the row of the configuration
table in ``docs/configuration.md``. :class:`~._settings.SchedulerSettings` validates by
walking this list, the environment reader (:mod:`._env`) reads by walking it,
and the settings store maps record names through :data:`OPERATOR_FIELDS`, derived
from it. The only other place a field is named is the dataclass itself, whose
annotations and keyword signature the type checker needs; a test keeps the two in step.

The order of :data:`FIELDS` is the order of the dataclass, of validation and of the
documentation table. A field's check may read the fields listed before it (``reserve``
is bounded by ``sessions``), never one after it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from .._classes import DownloadClass
from .._exceptions import SettingsError
from ..policy import Strategy
from ._parsing import (
    UnparsableError,
    parse_bool,
    parse_decimal,
    parse_integer,
    parse_rate,
    parse_size,
    parse_weights,
)
from ._structured import (
    check_class_windows,
    check_principal_classes,
    class_windows_json,
    parse_json_setting,
    principal_classes_json,
)

if TYPE_CHECKING:
    from ._values import SchedulerSettings

__all__ = [
    "DERIVABLE",
    "FIELDS",
    "FIELD_BY_NAME",
    "FIELD_NAMES",
    "MIB",
    "OPERATOR_FIELDS",
    "Check",
    "Scope",
    "SettingField",
    "derived_per_principal",
    "derived_reserve",
    "show_value",
]

MIB: Final = 1024 * 1024

_MAX_SESSIONS: Final = 65_536
_MAX_QUEUE: Final = 1_048_576
_MAX_WEIGHT: Final = 1000
_MAX_RANGES_PER_SESSION: Final = 64
_MAX_WAIT_SECONDS: Final = 3600.0
_MAX_AGING_MINUTES: Final = 10_080.0  # a week: beyond that aging is off in all but name
_SHOWN_CHARS: Final = 60


class Scope(Enum):
    """Where a setting may come from, and whether it may change after start-up."""

    #: In the operator record (R-SET-1): changes at run time, without a restart.
    OPERATOR = "operator"
    #: Environment only, but a ``configure`` call may still change it.
    ENVIRONMENT = "environment"
    #: Environment only, and sizes memory at start-up: a running scheduler keeps its value.
    START_UP = "start-up"


#: Checks one value; ``earlier`` is the settings being built, with every field listed
#: before this one already set and checked. Returns the value to store.
Check = Callable[[str, object, "SchedulerSettings"], object]
#: A bound that may depend on the fields before this one.
_Bound = int | Callable[["SchedulerSettings"], int] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingField:
    """Everything about one setting, in one place."""

    name: str  # attribute of SchedulerSettings; SettingsError.field names it
    scope: Scope
    check: Check
    variable: str  # the ARKVORY_* environment variable
    parse: Callable[[str], object]  # that variable's stripped text -> a value to check
    default_text: str  # the default as the documentation table shows it
    meaning: str  # the documentation table's last column
    # The rule that gives the value when none is set (``None`` passed or left out).
    derive: Callable[[SchedulerSettings], object] | None = None
    # The field whose value bounds or derives this one: when only that one was set in
    # the environment, it is the variable to blame for this field's error.
    depends_on: str | None = None
    # When this field's variable is unset, it takes the value of this field's variable.
    falls_back_to: str | None = None
    # The value in the record's JSON shape, for values that are not JSON as they are.
    to_json: Callable[[object], object] | None = None

    @property
    def record_name(self) -> str | None:
        """The camelCase name in the operator record and API; ``None`` if not an operator field."""
        if self.scope is not Scope.OPERATOR:
            return None
        head, *rest = self.name.split("_")
        return head + "".join(word.capitalize() for word in rest)


# -- derivation rules ---------------------------------------------------------------------


def derived_reserve(sessions: int) -> int:
    """One slot for ``interactive`` from four slots up (R-CLASS-3).

    With two or three slots a reserved one would hand people half the link.
    """
    return 1 if sessions >= 4 else 0


def derived_per_principal(sessions: int) -> int:
    """A quarter of the slots, at least one (this project's default; R-CLASS-5)."""
    return max(1, sessions // 4)


# -- checks -------------------------------------------------------------------------------


def show_value(value: object) -> str:
    """A value as an error message quotes it: repr, cut so a pasted blob stays readable."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return repr(value[:_SHOWN_CHARS] + "…")
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _whole(low: int, high: _Bound, unit: str, *, why: str = "") -> Check:
    def check(name: str, value: object, earlier: SchedulerSettings) -> int:
        # bool is an int to Python, but ``sessions=True`` is a mistake, not one slot.
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(name, f"must be a whole number{unit}, got {show_value(value)}")
        top = high(earlier) if callable(high) else high
        if value < low or (top is not None and value > top):
            expected = f"from {low} to {top}{why}" if top is not None else f"{low} or more"
            raise SettingsError(name, f"must be a whole number{unit} {expected}, got {value}")
        return int(value)

    return check


def _number(low: float, high: float, unit: str, *, open_low: bool = False) -> Check:
    def check(name: str, value: object, earlier: SchedulerSettings) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SettingsError(name, f"must be a number of{unit}, got {show_value(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise SettingsError(name, f"must be a finite number of{unit}, got {show_value(value)}")
        below = number <= low if open_low else number < low
        if below or number > high:
            lower = f"more than {low:g}" if open_low else f"from {low:g}"
            joiner = " and at most " if open_low else " to "
            raise SettingsError(name, f"must be {lower}{joiner}{high:g}{unit}, got {number:g}")
        return number

    return check


def _optional(check: Check) -> Check:
    """``None`` stands for "not set" (no rule derives it); anything else is checked."""

    def optional(name: str, value: object, earlier: SchedulerSettings) -> object:
        return None if value is None else check(name, value, earlier)

    return optional


def _check_strategy(name: str, value: object, earlier: SchedulerSettings) -> Strategy:
    if isinstance(value, str):
        try:
            return Strategy(value)
        except ValueError:
            pass
    raise SettingsError(
        name,
        f"unknown strategy {show_value(value)}; expected one of "
        + ", ".join(strategy.value for strategy in Strategy),
    )


def _check_weights(
    name: str, value: object, earlier: SchedulerSettings
) -> tuple[int, int, int, int]:
    # Set all four at once (R-SET-2): a partial list would silently reorder priorities.
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 4:
        raise SettingsError(
            name,
            "must be four whole numbers, for interactive, release, bulk and background; "
            f"got {show_value(value)}",
        )
    checked: list[int] = []
    for cls, weight in zip(DownloadClass, value, strict=True):
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int)
            or not 1 <= weight <= _MAX_WEIGHT
        ):
            raise SettingsError(
                name,
                f"the {cls.value} weight must be a whole number from 1 to {_MAX_WEIGHT}, "
                f"got {show_value(weight)}",
            )
        checked.append(int(weight))
    return (checked[0], checked[1], checked[2], checked[3])


def _check_bool(name: str, value: object, earlier: SchedulerSettings) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(name, f"must be true or false, got {show_value(value)}")
    return value


def _parse_strategy(text: str) -> Strategy:
    try:
        return Strategy(text.lower())
    except ValueError:
        raise UnparsableError(
            "one of " + ", ".join(strategy.value for strategy in Strategy)
        ) from None


# -- the list -----------------------------------------------------------------------------

_SIZE_HINT: Final = (
    "bytes, or with a unit: 16MiB, 40 MB (KiB/MiB/GiB are 1024-based, KB/MB/GB 1000)"
)

FIELDS: Final[tuple[SettingField, ...]] = (
    SettingField(
        name="strategy",
        scope=Scope.OPERATOR,
        check=_check_strategy,
        variable="ARKVORY_DOWNLOAD_STRATEGY",
        parse=_parse_strategy,
        default_text="`ordered`",
        meaning="`ordered`, `smallest-first` or `shared` (the per-request behaviour)",
    ),
    SettingField(
        name="sessions",
        scope=Scope.OPERATOR,
        check=_whole(1, _MAX_SESSIONS, " of slots"),
        variable="ARKVORY_MAX_DOWNLOAD_SESSIONS",
        parse=parse_integer,
        default_text="= `ARKVORY_MAX_DOWNLOADS`",
        meaning="session slots: downloads of large objects served at once (1–65536); "
        "the maximum when `ARKVORY_MIN_DOWNLOAD_SESSIONS` is set",
        falls_back_to="max_downloads",
    ),
    SettingField(
        name="min_sessions",
        scope=Scope.OPERATOR,
        # Unset is the fixed count of today, so no rule derives it; set, it is a floor
        # under ``sessions``, and a floor above the ceiling could never be met.
        check=_optional(
            _whole(1, lambda earlier: earlier.sessions, " of slots", why=" (sessions)")
        ),
        variable="ARKVORY_MIN_DOWNLOAD_SESSIONS",
        parse=parse_integer,
        default_text="unset: fixed at `sessions`",
        meaning="set (1 to `sessions`): the slots size themselves between this and "
        "`sessions` (ADR 0038); unset: always `sessions`",
        depends_on="sessions",
    ),
    SettingField(
        name="reserve",
        scope=Scope.OPERATOR,
        check=_whole(
            0,
            lambda earlier: earlier.sessions - 1,
            " of slots",
            why=" (sessions - 1: every class must keep at least one slot)",
        ),
        variable="ARKVORY_DOWNLOAD_RESERVE",
        parse=parse_integer,
        default_text="1 when sessions ≥ 4, else 0",
        meaning="slots reserved for `interactive`; at most sessions − 1",
        derive=lambda earlier: derived_reserve(earlier.sessions),
        depends_on="sessions",
    ),
    SettingField(
        name="per_principal",
        scope=Scope.OPERATOR,
        check=_whole(1, lambda earlier: earlier.sessions, " of slots", why=" (sessions)"),
        variable="ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL",
        parse=parse_integer,
        default_text="sessions / 4, at least 1",
        meaning="slots one principal may hold while another principal waits",
        derive=lambda earlier: derived_per_principal(earlier.sessions),
        depends_on="sessions",
    ),
    SettingField(
        name="weights",
        scope=Scope.OPERATOR,
        check=_check_weights,
        variable="ARKVORY_DOWNLOAD_WEIGHTS",
        parse=parse_weights,
        default_text="`8,4,2,1`",
        meaning="weights of interactive, release, bulk, background: all four, each 1–1000",
    ),
    SettingField(
        name="session_min_bytes",
        scope=Scope.OPERATOR,
        check=_whole(0, None, " of bytes"),
        variable="ARKVORY_DOWNLOAD_SESSION_MIN_BYTES",
        parse=parse_size,
        default_text="16 MiB",
        meaning=f"objects larger than this use download sessions; {_SIZE_HINT}",
    ),
    SettingField(
        name="idle_seconds",
        scope=Scope.OPERATOR,
        check=_number(0.0, _MAX_WAIT_SECONDS, " seconds", open_low=True),
        variable="ARKVORY_DOWNLOAD_IDLE_SECONDS",
        parse=parse_decimal,
        default_text="30",
        meaning="a pause between ranges longer than this frees the slot, in seconds",
    ),
    SettingField(
        name="aging_minutes",
        scope=Scope.OPERATOR,
        check=_number(0.0, _MAX_AGING_MINUTES, " minutes (0: off)"),
        variable="ARKVORY_DOWNLOAD_AGING_MINUTES",
        parse=parse_decimal,
        default_text="10",
        meaning="wait before a download moves one class up (not above `release`); 0 disables",
    ),
    SettingField(
        name="preempt",
        scope=Scope.OPERATOR,
        check=_check_bool,
        variable="ARKVORY_DOWNLOAD_PREEMPT",
        parse=parse_bool,
        default_text="`true`",
        meaning="preemption on or off: `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`",
    ),
    SettingField(
        name="ranges_per_session",
        scope=Scope.OPERATOR,
        check=_whole(1, _MAX_RANGES_PER_SESSION, " of responses"),
        variable="ARKVORY_DOWNLOAD_RANGES_PER_SESSION",
        parse=parse_integer,
        default_text="4",
        meaning="concurrent responses per session (clients behind one NAT), 1–64",
    ),
    SettingField(
        name="class_windows",
        scope=Scope.OPERATOR,
        check=check_class_windows,
        variable="ARKVORY_DOWNLOAD_CLASS_WINDOWS",
        parse=parse_json_setting,
        default_text="none",
        meaning='windows per class as JSON, e.g. `{"bulk": {"windows": [{"weekdays": '
        '["mon"], "start": "22:00", "end": "06:00", "zone": "Europe/Berlin"}], '
        '"outsideShare": 0}}`',
        to_json=class_windows_json,
    ),
    SettingField(
        name="service_account_classes",
        scope=Scope.OPERATOR,
        check=check_principal_classes,
        variable="ARKVORY_SERVICE_ACCOUNT_CLASSES",
        parse=parse_json_setting,
        default_text="none",
        meaning='class of named service accounts and links as JSON, e.g. `{"ci-bot": "bulk"}`',
        to_json=principal_classes_json,
    ),
    SettingField(
        name="max_downloads",
        scope=Scope.START_UP,
        check=_whole(1, _MAX_SESSIONS, " of requests"),
        variable="ARKVORY_MAX_DOWNLOADS",
        parse=parse_integer,
        default_text="16",
        meaning="concurrent requests for objects under the session threshold and for `shared`",
    ),
    SettingField(
        name="transfer_queue_limit",
        scope=Scope.START_UP,
        check=_whole(0, _MAX_QUEUE, " of requests"),
        variable="ARKVORY_TRANSFER_QUEUE_LIMIT",
        parse=parse_integer,
        default_text="64",
        meaning="per-request waiting queue; also the most third-party requests held at once",
    ),
    SettingField(
        name="transfer_queue_per_principal",
        scope=Scope.START_UP,
        check=_whole(1, None, " of requests"),
        variable="ARKVORY_TRANSFER_QUEUE_PER_PRINCIPAL",
        parse=parse_integer,
        default_text="8",
        meaning="per-request waiting per principal",
    ),
    SettingField(
        name="transfer_queue_wait_seconds",
        scope=Scope.START_UP,
        check=_number(0.0, _MAX_WAIT_SECONDS, " seconds"),
        variable="ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS",
        parse=parse_decimal,
        default_text="20",
        meaning="per-request wait before `503`, in seconds (0–3600)",
    ),
    SettingField(
        name="hold_seconds",
        scope=Scope.START_UP,
        check=_number(0.0, _MAX_WAIT_SECONDS, " seconds"),
        variable="ARKVORY_DOWNLOAD_HOLD_SECONDS",
        parse=parse_decimal,
        default_text="= `ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS`",
        meaning="how long a request without `Arkvory-Download-Id` is held before `503`, in seconds",
        # The hold *is* the per-request wait unless set (R-HOLD-1).
        derive=lambda earlier: earlier.transfer_queue_wait_seconds,
        depends_on="transfer_queue_wait_seconds",
    ),
    SettingField(
        name="queue_limit",
        scope=Scope.START_UP,
        check=_whole(1, _MAX_QUEUE, " of sessions"),
        variable="ARKVORY_DOWNLOAD_QUEUE_LIMIT",
        parse=parse_integer,
        default_text="65536",
        meaning="sessions in total, active and waiting (up to 1048576)",
    ),
    SettingField(
        name="queue_per_principal",
        scope=Scope.START_UP,
        check=_whole(1, lambda earlier: earlier.queue_limit, " of sessions", why=" (queue_limit)"),
        variable="ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL",
        parse=parse_integer,
        default_text="4096",
        meaning="sessions per principal; at most the queue limit",
        depends_on="queue_limit",
    ),
    SettingField(
        name="bandwidth",
        scope=Scope.ENVIRONMENT,
        check=_optional(_whole(1, None, " of bytes per second")),
        variable="ARKVORY_DOWNLOAD_BANDWIDTH",
        parse=parse_rate,
        default_text="unset",
        meaning="link bandwidth in bytes/s: the rate estimates start from, which a reading "
        "of seven busy seconds may raise and none lowers (ADR 0034); units as for sizes, "
        "e.g. `125MB/s`",
    ),
)

FIELD_NAMES: Final[tuple[str, ...]] = tuple(setting.name for setting in FIELDS)

#: camelCase name in the operator record and API -> field name (R-SET-1). Every other
#: field stays environment-only.
OPERATOR_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {setting.record_name: setting.name for setting in FIELDS if setting.record_name is not None}
)

#: Fields that follow a rule when not set.
DERIVABLE: Final[frozenset[str]] = frozenset(
    setting.name for setting in FIELDS if setting.derive is not None
)

FIELD_BY_NAME: Final[Mapping[str, SettingField]] = MappingProxyType(
    {setting.name: setting for setting in FIELDS}
)
