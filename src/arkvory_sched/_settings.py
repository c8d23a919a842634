"""Scheduler settings: environment defaults, operator overrides, and one place that says no.

Settings come from two layers (R-SET-1). The environment gives the defaults and is read
once at start-up by :meth:`SchedulerSettings.from_env`; an operator record stores only
the fields an operator changed and is laid over those defaults with
:meth:`SchedulerSettings.with_changes`, so an empty record means "back to the
environment". Some fields size memory when the process starts (queue lengths, the
third-party hold) and therefore exist only in the environment.

Every path into a :class:`SchedulerSettings` goes through the same validation, so a
settings value that cannot work is refused before anything runs on it: at start-up
the process stops with a :class:`ConfigurationError` naming the environment variable,
and through the settings API the ``400`` names the field (:class:`SettingsError`). A
scheduler holding a ``SchedulerSettings`` never has to re-check it.

Three defaults are derived from other fields (``reserve`` and ``per_principal`` from
``sessions``, ``hold_seconds`` from ``transfer_queue_wait_seconds``). They are resolved
when the object is built, so the scheduler core always reads plain numbers: the class
has a hand-written ``__init__`` that accepts ``None`` for "derive it" while the
attributes themselves are typed ``int``/``float``. The dataclass machinery still
provides equality, hashing, ``repr`` and immutability.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from ._classes import DownloadClass
from ._exceptions import ConfigurationError, SettingsError

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "MIB",
    "OPERATOR_FIELDS",
    "EnvironmentVariable",
    "SchedulerSettings",
    "Strategy",
    "configuration_table",
]

MIB: Final = 1024 * 1024

_MAX_SESSIONS: Final = 65_536
_MAX_QUEUE: Final = 1_048_576
_MAX_WEIGHT: Final = 1000
_MAX_RANGES_PER_SESSION: Final = 64
_MAX_WAIT_SECONDS: Final = 3600.0
_MAX_AGING_MINUTES: Final = 10_080.0  # a week: beyond that aging is off in all but name
_SHOWN_CHARS: Final = 60


class Strategy(StrEnum):
    """How waiting downloads are ordered (R-STRAT); switchable at run time."""

    ORDERED = "ordered"
    SMALLEST_FIRST = "smallest-first"
    SHARED = "shared"


# camelCase name in the operator record and API -> field name. Only these are operator
# settings; every other field sizes memory at start-up and stays environment-only.
OPERATOR_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "strategy": "strategy",
        "sessions": "sessions",
        "reserve": "reserve",
        "perPrincipal": "per_principal",
        "weights": "weights",
        "sessionMinBytes": "session_min_bytes",
        "idleSeconds": "idle_seconds",
        "agingMinutes": "aging_minutes",
        "preempt": "preempt",
        "rangesPerSession": "ranges_per_session",
    }
)

_DERIVABLE: Final = frozenset({"reserve", "per_principal", "hold_seconds"})


def _derived_reserve(sessions: int) -> int:
    # With two or three slots a reserved one would hand people half the link (R-CLASS-3).
    return 1 if sessions >= 4 else 0


def _derived_per_principal(sessions: int) -> int:
    return max(1, sessions // 4)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class SchedulerSettings:
    """Everything the scheduler reads to decide, already checked and fully resolved.

    Construct with keywords; pass ``None`` for ``reserve``, ``per_principal`` or
    ``hold_seconds`` (or leave them out) to have them derived. Invalid values raise
    :class:`SettingsError` naming the field. Instances are immutable: a change is a new
    object from :meth:`with_changes`, handed to ``DownloadScheduler.configure``.
    (``dataclasses.replace`` works too, but turns every derived value into an explicit
    one, so a later change of ``sessions`` no longer re-applies the rule.)
    """

    # Operator settings (R-SET-1): may change at run time.
    strategy: Strategy
    sessions: int
    reserve: int
    per_principal: int
    weights: tuple[int, int, int, int]
    session_min_bytes: int
    idle_seconds: float
    aging_minutes: float
    preempt: bool
    ranges_per_session: int
    # Environment-only: these size memory when the process starts.
    max_downloads: int
    transfer_queue_limit: int
    transfer_queue_per_principal: int
    transfer_queue_wait_seconds: float
    hold_seconds: float
    queue_limit: int
    queue_per_principal: int
    bandwidth: int | None
    # Which of the derivable fields follow their rule rather than an explicit value;
    # kept so that a later change of ``sessions`` can re-apply the rule (R-SET-2).
    _derived: frozenset[str] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        *,
        strategy: Strategy | str = Strategy.ORDERED,
        sessions: int = 16,
        reserve: int | None = None,
        per_principal: int | None = None,
        weights: Sequence[int] = (8, 4, 2, 1),
        session_min_bytes: int = 16 * MIB,
        idle_seconds: float = 30.0,
        aging_minutes: float = 10.0,
        preempt: bool = True,
        ranges_per_session: int = 4,
        max_downloads: int = 16,
        transfer_queue_limit: int = 64,
        transfer_queue_per_principal: int = 8,
        transfer_queue_wait_seconds: float = 20.0,
        hold_seconds: float | None = None,
        queue_limit: int = 65_536,
        queue_per_principal: int = 4_096,
        bandwidth: int | None = None,
    ) -> None:
        self._setup(
            {
                "strategy": strategy,
                "sessions": sessions,
                "reserve": reserve,
                "per_principal": per_principal,
                "weights": weights,
                "session_min_bytes": session_min_bytes,
                "idle_seconds": idle_seconds,
                "aging_minutes": aging_minutes,
                "preempt": preempt,
                "ranges_per_session": ranges_per_session,
                "max_downloads": max_downloads,
                "transfer_queue_limit": transfer_queue_limit,
                "transfer_queue_per_principal": transfer_queue_per_principal,
                "transfer_queue_wait_seconds": transfer_queue_wait_seconds,
                "hold_seconds": hold_seconds,
                "queue_limit": queue_limit,
                "queue_per_principal": queue_per_principal,
                "bandwidth": bandwidth,
            },
            derived=frozenset(),
        )

    # -- reading ----------------------------------------------------------------------

    def weight_of(self, cls: DownloadClass) -> int:
        """The weight of a class; weights are stored most urgent first, like the classes."""
        return self.weights[cls.rank]

    @property
    def derived_fields(self) -> frozenset[str]:
        """Fields whose value follows a rule, not an explicit setting (for display)."""
        return self._derived

    def operator_fields(self) -> dict[str, object]:
        """The R-SET-1 fields as the settings API shows them: camelCase, JSON-ready."""
        values: dict[str, object] = {}
        for name, attribute in OPERATOR_FIELDS.items():
            value = getattr(self, attribute)
            if isinstance(value, Strategy):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            values[name] = value
        return values

    # -- building ---------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SchedulerSettings:
        """Settings from ``ARKVORY_*`` variables; a bad value stops start-up, named.

        Unset or empty variables keep the default. ``ARKVORY_MAX_DOWNLOAD_SESSIONS``
        defaults to ``ARKVORY_MAX_DOWNLOADS`` so that an installation tuned before
        sessions existed keeps its concurrency.
        """
        env = os.environ if environ is None else environ
        values = cls()._values()
        given: dict[str, tuple[str, str]] = {}  # field -> (variable, raw value)
        for variable in ENVIRONMENT_VARIABLES:
            raw = env.get(variable.name, "")
            text = raw.strip()
            if not text:
                continue
            try:
                parsed = _ENV_PARSERS[variable.name](text)
            except _UnparsableError as error:
                raise ConfigurationError(
                    variable.name,
                    variable.field,
                    f"{variable.name}={_show(raw)}: expected {error.expected}",
                ) from None
            values[variable.field] = parsed
            given[variable.field] = (variable.name, raw)
        if "sessions" not in given and "max_downloads" in given:
            values["sessions"] = values["max_downloads"]
            given["sessions"] = given["max_downloads"]
        try:
            return cls._from_values(values, derived=frozenset())
        except SettingsError as error:
            raise _blame_variable(error, given) from None

    def with_changes(self, **changes: object) -> SchedulerSettings:
        """These settings with some fields changed, by the rules of R-SET-2.

        A change of ``sessions`` that does not also set ``reserve`` or
        ``per_principal`` lowers them as far as needed to fit — never raises them, so
        an operator never finds more reserved or per-principal slots than they chose.
        Derived values are lowered to the rule for the new ``sessions`` (no reserve
        below four slots); explicit ones to the largest value that still fits.
        ``None`` for a derivable field returns it to its rule. ``weights`` is always
        all four.
        """
        for name in changes:
            if name not in _FIELD_NAMES:
                raise SettingsError(
                    name, "unknown setting; known settings are " + ", ".join(_FIELD_NAMES)
                )
        values: dict[str, object] = {name: getattr(self, name) for name in _FIELD_NAMES}
        values.update(changes)
        derived = {name for name in self._derived if name not in changes}
        if "sessions" in changes:
            sessions = _whole("sessions", changes["sessions"], 1, _MAX_SESSIONS, " of slots")
            if "reserve" not in changes:
                fit = _derived_reserve(sessions) if "reserve" in derived else sessions - 1
                values["reserve"] = min(self.reserve, fit)
            if "per_principal" not in changes:
                fit = _derived_per_principal(sessions) if "per_principal" in derived else sessions
                values["per_principal"] = min(self.per_principal, fit)
        if "hold_seconds" in derived:
            # The hold *is* the per-request wait unless set: it follows a changed wait.
            values["hold_seconds"] = None
            derived.discard("hold_seconds")
        return SchedulerSettings._from_values(values, derived=frozenset(derived))

    def keeping_environment_only(self, running: SchedulerSettings) -> SchedulerSettings:
        """These settings with the fields that size memory taken from ``running``.

        Queue lengths, the per-request places and the third-party hold are fixed at
        start-up (R-SET-1): a change at run time must not resize what was reserved.
        """
        return dataclasses.replace(
            self,
            queue_limit=running.queue_limit,
            queue_per_principal=running.queue_per_principal,
            transfer_queue_limit=running.transfer_queue_limit,
            transfer_queue_per_principal=running.transfer_queue_per_principal,
            transfer_queue_wait_seconds=running.transfer_queue_wait_seconds,
            hold_seconds=running.hold_seconds,
            max_downloads=running.max_downloads,
        )

    @classmethod
    def _from_values(
        cls, values: Mapping[str, object], *, derived: frozenset[str]
    ) -> SchedulerSettings:
        # Builds from untyped values (environment, operator record) through the same
        # checks as __init__, without pretending to the type checker that they are typed.
        settings = object.__new__(cls)
        settings._setup(values, derived=derived)
        return settings

    def _values(self) -> dict[str, object]:
        """Field values, with ``None`` for fields that follow their rule."""
        return {
            name: None if name in self._derived else getattr(self, name) for name in _FIELD_NAMES
        }

    def _setup(self, values: Mapping[str, object], *, derived: frozenset[str]) -> None:
        """Check every value and resolve the derived ones; the only way fields get set.

        ``derived`` names fields whose given value was computed from their rule (a
        lowered derived value) so that they stay marked as derived.
        """
        marks = set(derived & _DERIVABLE)
        strategy = _strategy(values["strategy"])
        sessions = _whole("sessions", values["sessions"], 1, _MAX_SESSIONS, " of slots")

        reserve_value = values["reserve"]
        if reserve_value is None:
            reserve_value = _derived_reserve(sessions)
            marks.add("reserve")
        reserve = _whole(
            "reserve",
            reserve_value,
            0,
            sessions - 1,
            " of slots",
            why=" (sessions - 1: every class must keep at least one slot)",
        )

        per_principal_value = values["per_principal"]
        if per_principal_value is None:
            per_principal_value = _derived_per_principal(sessions)
            marks.add("per_principal")
        per_principal = _whole(
            "per_principal", per_principal_value, 1, sessions, " of slots", why=" (sessions)"
        )

        weights = _weights(values["weights"])
        session_min_bytes = _whole(
            "session_min_bytes", values["session_min_bytes"], 0, None, " of bytes"
        )
        idle_seconds = _number(
            "idle_seconds",
            values["idle_seconds"],
            0.0,
            _MAX_WAIT_SECONDS,
            " seconds",
            open_low=True,
        )
        aging_minutes = _number(
            "aging_minutes", values["aging_minutes"], 0.0, _MAX_AGING_MINUTES, " minutes (0: off)"
        )
        preempt = values["preempt"]
        if not isinstance(preempt, bool):
            raise SettingsError("preempt", f"must be true or false, got {_show(preempt)}")
        ranges_per_session = _whole(
            "ranges_per_session",
            values["ranges_per_session"],
            1,
            _MAX_RANGES_PER_SESSION,
            " of responses",
        )
        max_downloads = _whole(
            "max_downloads", values["max_downloads"], 1, _MAX_SESSIONS, " of requests"
        )
        transfer_queue_limit = _whole(
            "transfer_queue_limit", values["transfer_queue_limit"], 0, _MAX_QUEUE, " of requests"
        )
        transfer_queue_per_principal = _whole(
            "transfer_queue_per_principal",
            values["transfer_queue_per_principal"],
            1,
            None,
            " of requests",
        )
        transfer_queue_wait_seconds = _number(
            "transfer_queue_wait_seconds",
            values["transfer_queue_wait_seconds"],
            0.0,
            _MAX_WAIT_SECONDS,
            " seconds",
        )
        hold_value = values["hold_seconds"]
        if hold_value is None:
            hold_value = transfer_queue_wait_seconds
            marks.add("hold_seconds")
        hold_seconds = _number("hold_seconds", hold_value, 0.0, _MAX_WAIT_SECONDS, " seconds")
        queue_limit = _whole("queue_limit", values["queue_limit"], 1, _MAX_QUEUE, " of sessions")
        queue_per_principal = _whole(
            "queue_per_principal",
            values["queue_per_principal"],
            1,
            queue_limit,
            " of sessions",
            why=" (queue_limit)",
        )
        bandwidth_value = values["bandwidth"]
        bandwidth = (
            None
            if bandwidth_value is None
            else _whole("bandwidth", bandwidth_value, 1, None, " of bytes per second")
        )

        resolved: dict[str, object] = {
            "strategy": strategy,
            "sessions": sessions,
            "reserve": reserve,
            "per_principal": per_principal,
            "weights": weights,
            "session_min_bytes": session_min_bytes,
            "idle_seconds": idle_seconds,
            "aging_minutes": aging_minutes,
            "preempt": preempt,
            "ranges_per_session": ranges_per_session,
            "max_downloads": max_downloads,
            "transfer_queue_limit": transfer_queue_limit,
            "transfer_queue_per_principal": transfer_queue_per_principal,
            "transfer_queue_wait_seconds": transfer_queue_wait_seconds,
            "hold_seconds": hold_seconds,
            "queue_limit": queue_limit,
            "queue_per_principal": queue_per_principal,
            "bandwidth": bandwidth,
            "_derived": frozenset(marks),
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)


_FIELD_NAMES: Final[tuple[str, ...]] = tuple(
    f.name for f in fields(SchedulerSettings) if not f.name.startswith("_")
)


# -- validation helpers ---------------------------------------------------------------


def _show(value: object) -> str:
    """A value as an error message quotes it: repr, cut so a pasted blob stays readable."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return repr(value[:_SHOWN_CHARS] + "…")
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _whole(
    name: str,
    value: object,
    low: int,
    high: int | None,
    unit: str,
    *,
    why: str = "",
) -> int:
    # bool is an int to Python, but ``sessions=True`` is a mistake, not one slot.
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(name, f"must be a whole number{unit}, got {_show(value)}")
    if value < low or (high is not None and value > high):
        expected = f"from {low} to {high}{why}" if high is not None else f"{low} or more"
        raise SettingsError(name, f"must be a whole number{unit} {expected}, got {value}")
    return int(value)


def _number(
    name: str,
    value: object,
    low: float,
    high: float,
    unit: str,
    *,
    open_low: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SettingsError(name, f"must be a number of{unit}, got {_show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise SettingsError(name, f"must be a finite number of{unit}, got {_show(value)}")
    below = number <= low if open_low else number < low
    if below or number > high:
        lower = f"more than {low:g}" if open_low else f"from {low:g}"
        joiner = " and at most " if open_low else " to "
        raise SettingsError(name, f"must be {lower}{joiner}{high:g}{unit}, got {number:g}")
    return number


def _strategy(value: object) -> Strategy:
    if isinstance(value, str):
        try:
            return Strategy(value)
        except ValueError:
            pass
    raise SettingsError(
        "strategy",
        f"unknown strategy {_show(value)}; expected one of "
        + ", ".join(strategy.value for strategy in Strategy),
    )


def _weights(value: object) -> tuple[int, int, int, int]:
    # Set all four at once (R-SET-2): a partial list would silently reorder priorities.
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 4:
        raise SettingsError(
            "weights",
            "must be four whole numbers, for interactive, release, bulk and background; "
            f"got {_show(value)}",
        )
    checked: list[int] = []
    for cls, weight in zip(DownloadClass, value, strict=True):
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int)
            or not 1 <= weight <= _MAX_WEIGHT
        ):
            raise SettingsError(
                "weights",
                f"the {cls.value} weight must be a whole number from 1 to {_MAX_WEIGHT}, "
                f"got {_show(weight)}",
            )
        checked.append(int(weight))
    return (checked[0], checked[1], checked[2], checked[3])


# -- environment ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnvironmentVariable:
    """One configuration variable, as the documentation table shows it."""

    name: str
    field: str
    default_text: str
    meaning: str


_SIZE_HINT = "bytes, or with a unit: 16MiB, 40 MB (KiB/MiB/GiB are 1024-based, KB/MB/GB 1000)"

ENVIRONMENT_VARIABLES: Final[tuple[EnvironmentVariable, ...]] = (
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_STRATEGY",
        "strategy",
        "`ordered`",
        "`ordered`, `smallest-first` or `shared` (the per-request behaviour)",
    ),
    EnvironmentVariable(
        "ARKVORY_MAX_DOWNLOAD_SESSIONS",
        "sessions",
        "= `ARKVORY_MAX_DOWNLOADS`",
        "session slots: downloads of large objects served at once (1–65536)",
    ),
    EnvironmentVariable(
        "ARKVORY_MAX_DOWNLOADS",
        "max_downloads",
        "16",
        "concurrent requests for objects under the session threshold and for `shared`",
    ),
    EnvironmentVariable(
        "ARKVORY_TRANSFER_QUEUE_LIMIT",
        "transfer_queue_limit",
        "64",
        "per-request waiting queue; also the most third-party requests held at once",
    ),
    EnvironmentVariable(
        "ARKVORY_TRANSFER_QUEUE_PER_PRINCIPAL",
        "transfer_queue_per_principal",
        "8",
        "per-request waiting per principal",
    ),
    EnvironmentVariable(
        "ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS",
        "transfer_queue_wait_seconds",
        "20",
        "per-request wait before `503`, in seconds (0–3600)",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_HOLD_SECONDS",
        "hold_seconds",
        "= `ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS`",
        "how long a request without `Arkvory-Download-Id` is held before `503`, in seconds",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES",
        "session_min_bytes",
        "16 MiB",
        f"objects larger than this use download sessions; {_SIZE_HINT}",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_RESERVE",
        "reserve",
        "1 when sessions ≥ 4, else 0",
        "slots reserved for `interactive`; at most sessions − 1",
    ),
    EnvironmentVariable(
        "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL",
        "per_principal",
        "sessions / 4, at least 1",
        "slots one principal may hold while another principal waits",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_WEIGHTS",
        "weights",
        "`8,4,2,1`",
        "weights of interactive, release, bulk, background: all four, each 1–1000",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_IDLE_SECONDS",
        "idle_seconds",
        "30",
        "a pause between ranges longer than this frees the slot, in seconds",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_AGING_MINUTES",
        "aging_minutes",
        "10",
        "wait before a download moves one class up (not above `release`); 0 disables",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_PREEMPT",
        "preempt",
        "`true`",
        "preemption on or off: `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_RANGES_PER_SESSION",
        "ranges_per_session",
        "4",
        "concurrent responses per session (clients behind one NAT), 1–64",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_QUEUE_LIMIT",
        "queue_limit",
        "65536",
        "sessions in total, active and waiting (up to 1048576)",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL",
        "queue_per_principal",
        "4096",
        "sessions per principal; at most the queue limit",
    ),
    EnvironmentVariable(
        "ARKVORY_DOWNLOAD_BANDWIDTH",
        "bandwidth",
        "unset",
        "link bandwidth in bytes/s, a floor for the rate estimate; units as for sizes, "
        "e.g. `125MB/s`",
    ),
)


def configuration_table() -> str:
    """The Markdown table of ``docs/configuration.md``; a test keeps the two equal."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    lines += [
        f"| `{variable.name}` | {variable.default_text} | {variable.meaning} |"
        for variable in ENVIRONMENT_VARIABLES
    ]
    return "\n".join(lines) + "\n"


class _UnparsableError(ValueError):
    """Text that is not even the right kind of value; ``expected`` says what would be."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)")
# Keyed by the unit without its final "B", lower-cased. The "B" itself must be upper
# case: "Mb" is a megabit to many people, and a bandwidth eight times off is worse
# than a refused start-up.
_UNITS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "": 1,
        "k": 1000,
        "m": 1000**2,
        "g": 1000**3,
        "t": 1000**4,
        "ki": 1024,
        "mi": 1024**2,
        "gi": 1024**3,
        "ti": 1024**4,
    }
)
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})


def _parse_integer(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise _UnparsableError("a whole number")
    return int(text)


def _parse_decimal(text: str) -> float:
    # No "inf", "nan" or exponents: a duration is written the way people write it.
    if not _DECIMAL.fullmatch(text):
        raise _UnparsableError("a number, such as 30 or 2.5")
    return float(text)


def _parse_size(text: str) -> int:
    expected = "a whole number of bytes, or a number with a unit such as 16MiB or 40 MB"
    match = _SIZE.fullmatch(text)
    if match is None:
        raise _UnparsableError(expected)
    unit = match["unit"]
    if unit and not unit.endswith("B"):
        raise _UnparsableError(expected + " (upper-case B: sizes are bytes, not bits)")
    factor = _UNITS.get(unit[:-1].lower() if unit else "")
    if factor is None:
        raise _UnparsableError(expected + " (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
    size = Decimal(match["number"]) * factor
    if size != size.to_integral_value():
        raise _UnparsableError(expected + " (a whole number of bytes)")
    return int(size)


def _parse_rate(text: str) -> int:
    return _parse_size(text.removesuffix("/s").rstrip())


def _parse_bool(text: str) -> bool:
    word = text.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise _UnparsableError("true or false (also yes/no, on/off, 1/0)")


def _parse_weights(text: str) -> tuple[int, ...]:
    expected = (
        "four comma-separated whole numbers for interactive, release, bulk and "
        "background, such as 8,4,2,1"
    )
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 4 or not all(_INTEGER.fullmatch(part) for part in parts):
        raise _UnparsableError(expected)
    return tuple(int(part) for part in parts)


def _parse_strategy(text: str) -> Strategy:
    try:
        return Strategy(text.lower())
    except ValueError:
        raise _UnparsableError(
            "one of " + ", ".join(strategy.value for strategy in Strategy)
        ) from None


_ENV_PARSERS: Final[Mapping[str, Callable[[str], object]]] = MappingProxyType(
    {
        "ARKVORY_DOWNLOAD_STRATEGY": _parse_strategy,
        "ARKVORY_MAX_DOWNLOAD_SESSIONS": _parse_integer,
        "ARKVORY_MAX_DOWNLOADS": _parse_integer,
        "ARKVORY_TRANSFER_QUEUE_LIMIT": _parse_integer,
        "ARKVORY_TRANSFER_QUEUE_PER_PRINCIPAL": _parse_integer,
        "ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS": _parse_decimal,
        "ARKVORY_DOWNLOAD_HOLD_SECONDS": _parse_decimal,
        "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": _parse_size,
        "ARKVORY_DOWNLOAD_RESERVE": _parse_integer,
        "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": _parse_integer,
        "ARKVORY_DOWNLOAD_WEIGHTS": _parse_weights,
        "ARKVORY_DOWNLOAD_IDLE_SECONDS": _parse_decimal,
        "ARKVORY_DOWNLOAD_AGING_MINUTES": _parse_decimal,
        "ARKVORY_DOWNLOAD_PREEMPT": _parse_bool,
        "ARKVORY_DOWNLOAD_RANGES_PER_SESSION": _parse_integer,
        "ARKVORY_DOWNLOAD_QUEUE_LIMIT": _parse_integer,
        "ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL": _parse_integer,
        "ARKVORY_DOWNLOAD_BANDWIDTH": _parse_rate,
    }
)

_FIELD_OF: Final[Mapping[str, str]] = MappingProxyType(
    {variable.name: variable.field for variable in ENVIRONMENT_VARIABLES}
)
_VARIABLE_OF: Final[Mapping[str, str]] = MappingProxyType(
    {variable.field: variable.name for variable in ENVIRONMENT_VARIABLES}
)

# A field that fails only because of another one: when the failing field kept its
# default, the variable to blame is the other field's.
_DEPENDS_ON: Final[Mapping[str, str]] = MappingProxyType(
    {
        "reserve": "sessions",
        "per_principal": "sessions",
        "queue_per_principal": "queue_limit",
        "hold_seconds": "transfer_queue_wait_seconds",
    }
)


def _blame_variable(
    error: SettingsError, given: Mapping[str, tuple[str, str]]
) -> ConfigurationError:
    """Turn a field's validation error into one that names the variable to fix.

    The error's ``field`` is the blamed variable's own field: a bad
    ``ARKVORY_MAX_DOWNLOADS`` fails first as the session count it also defaults,
    but ``max_downloads`` is what the operator wrote.
    """
    if error.field in given:
        variable, raw = given[error.field]
        return ConfigurationError(
            variable, _FIELD_OF[variable], f"{variable}={_show(raw)}: {error.message}"
        )
    cause = _DEPENDS_ON.get(error.field)
    if cause is not None and cause in given:
        variable, raw = given[cause]
        unset = _VARIABLE_OF[error.field]
        return ConfigurationError(
            variable,
            _FIELD_OF[variable],
            f"{variable}={_show(raw)} does not fit the default {error.field} "
            f"({error.field} {error.message}); set {unset} as well",
        )
    variable = _VARIABLE_OF.get(error.field, error.field)
    return ConfigurationError(variable, error.field, f"{variable} (default): {error.message}")
