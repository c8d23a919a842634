"""Scheduler settings: environment defaults, operator overrides, and one place that says no.

Settings come from two layers (R-SET-1). The environment gives the defaults and is read
once at start-up by :meth:`SchedulerSettings.from_env` (:mod:`._env`); an
operator record stores only the fields an operator changed and is laid over those
defaults with :meth:`SchedulerSettings.with_changes`, so an empty record means "back to
the environment". Some fields size memory when the process starts (queue lengths, the
third-party hold) and therefore exist only in the environment.

Every path into a :class:`SchedulerSettings` goes through the same validation, so a
settings value that cannot work is refused before anything runs on it: at start-up
the process stops with a :class:`ConfigurationError` naming the environment variable,
and through the settings API the ``400`` names the field (:class:`SettingsError`). A
scheduler holding a ``SchedulerSettings`` never has to re-check it.

What each field accepts, which rule derives it, its variable and whether an operator
may change it are stated once, in :data:`~._fields.FIELDS`; this module is the
value those fields make up.

Three defaults are derived from other fields (``reserve`` and ``per_principal`` from
``sessions``, ``hold_seconds`` from ``transfer_queue_wait_seconds``). They are resolved
when the object is built, so the scheduler core always reads plain numbers: the class
has a hand-written ``__init__`` that accepts ``None`` for "derive it" while the
attributes themselves are typed ``int``/``float``. The dataclass machinery still
provides equality, hashing, ``repr`` and immutability.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from .._classes import DownloadClass, PrincipalKind
from .._exceptions import SettingsError
from ..policy import AdmissionRules, ClassSchedule, ClassSchedules, Strategy, base_class_of
from ._env import read_environment
from ._fields import (
    DERIVABLE,
    FIELD_BY_NAME,
    FIELD_NAMES,
    FIELDS,
    MIB,
    OPERATOR_FIELDS,
    Scope,
    derived_per_principal,
    derived_reserve,
)
from ._structured import PrincipalClasses

__all__ = ["MIB", "OPERATOR_FIELDS", "SchedulerSettings"]


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class SchedulerSettings:
    """Everything the scheduler reads to decide, already checked and fully resolved.

    Construct with keywords; pass ``None`` for ``reserve``, ``per_principal`` or
    ``hold_seconds`` (or leave them out) to have them derived; ``None`` for
    ``min_sessions`` or ``bandwidth`` is "not set", not a rule. Invalid values raise
    :class:`SettingsError` naming the field. Instances are immutable: a change is a new
    object from :meth:`with_changes`, handed to ``DownloadScheduler.configure``.
    (``dataclasses.replace`` works too, but turns every derived value into an explicit
    one, so a later change of ``sessions`` no longer re-applies the rule.)

    The fields are those of :data:`~._fields.FIELDS`, in its order.
    """

    # Operator settings (R-SET-1): may change at run time.
    strategy: Strategy
    sessions: int
    min_sessions: int | None
    reserve: int
    per_principal: int
    weights: tuple[int, int, int, int]
    session_min_bytes: int
    idle_seconds: float
    aging_minutes: float
    preempt: bool
    ranges_per_session: int
    class_windows: ClassSchedules
    service_account_classes: PrincipalClasses
    # Environment-only: these size memory when the process starts (all but bandwidth).
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
    # What the policy reads to plan a request, built once per change: plain values, so
    # the policy needs nothing of the settings (service_account_classes as a dict).
    _admission_rules: AdmissionRules = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        *,
        strategy: Strategy | str = Strategy.ORDERED,
        sessions: int = 16,
        min_sessions: int | None = None,
        reserve: int | None = None,
        per_principal: int | None = None,
        weights: Sequence[int] = (8, 4, 2, 1),
        session_min_bytes: int = 16 * MIB,
        idle_seconds: float = 30.0,
        aging_minutes: float = 10.0,
        preempt: bool = True,
        ranges_per_session: int = 4,
        class_windows: ClassSchedules | Mapping[str, object] = (),
        service_account_classes: PrincipalClasses | Mapping[str, str] = (),
        max_downloads: int = 16,
        transfer_queue_limit: int = 64,
        transfer_queue_per_principal: int = 8,
        transfer_queue_wait_seconds: float = 20.0,
        hold_seconds: float | None = None,
        queue_limit: int = 65_536,
        queue_per_principal: int = 4_096,
        bandwidth: int | None = None,
    ) -> None:
        # Every keyword is a field (a test holds the signature to FIELDS), so the
        # arguments are the values, without naming each field once more.
        values = dict(locals())
        del values["self"]
        self._setup(values, derived=frozenset())

    # -- reading ----------------------------------------------------------------------

    def weight_of(self, cls: DownloadClass) -> int:
        """The weight of a class; weights are stored most urgent first, like the classes."""
        return self.weights[cls.rank]

    def schedule_of(self, cls: DownloadClass) -> ClassSchedule | None:
        """The operator's windows of a class, or ``None``: the class is always open."""
        for scheduled, schedule in self.class_windows:
            if scheduled is cls:
                return schedule
        return None

    def base_class_of(
        self, principal: str, kind: PrincipalKind, given: DownloadClass | None
    ) -> DownloadClass:
        """The class a principal is admitted in before any header lowers it (R-CLASS-6).

        A service account or link the operator listed gets the listed class; otherwise
        the class the host's resolver gave, or the default of its kind (R-CLASS-2).
        People are never listed: their class is the host's business.
        """
        return base_class_of(self._admission_rules, principal, kind, given)

    @property
    def automatic_sessions(self) -> bool:
        """Whether the number of slots in use sizes itself, between ``min_sessions`` and
        ``sessions`` (ADR 0038).

        Only a range with room in it sizes anything: ``min_sessions`` equal to
        ``sessions`` is a fixed count, the same as leaving it unset, so a scheduler
        that asks this need not also tell the two apart (and a ``sessions`` lowered
        onto the minimum, R-SET-2, quietly returns to a fixed count).
        """
        return self.min_sessions is not None and self.min_sessions < self.sessions

    @property
    def admission_rules(self) -> AdmissionRules:
        """What the policy reads to plan a request (``policy.plan_request``)."""
        return self._admission_rules

    @property
    def derived_fields(self) -> frozenset[str]:
        """Fields whose value follows a rule, not an explicit setting (for display)."""
        return self._derived

    def operator_fields(self) -> dict[str, object]:
        """The R-SET-1 fields as the settings API shows them: camelCase, JSON-ready."""
        values: dict[str, object] = {}
        for name, attribute in OPERATOR_FIELDS.items():
            value = getattr(self, attribute)
            to_json = FIELD_BY_NAME[attribute].to_json
            if to_json is not None:
                value = to_json(value)
            elif isinstance(value, Strategy):
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
        reading = read_environment(os.environ if environ is None else environ, cls()._values())
        try:
            return cls._from_values(reading.values, derived=frozenset())
        except SettingsError as error:
            raise reading.blame(error) from None

    def with_changes(self, **changes: object) -> SchedulerSettings:
        """These settings with some fields changed, by the rules of R-SET-2.

        A change of ``sessions`` that does not also set ``reserve``,
        ``per_principal`` or ``min_sessions`` lowers them as far as needed to fit —
        never raises them, so an operator never finds more reserved, per-principal or
        minimum slots than they chose. Derived values are lowered to the rule for the
        new ``sessions`` (no reserve below four slots); explicit ones to the largest
        value that still fits. ``None`` for a derivable field returns it to its rule;
        for ``min_sessions`` it is "not set" (a fixed count). ``weights`` is always
        all four.
        """
        for name in changes:
            if name not in FIELD_BY_NAME:
                raise SettingsError(
                    name, "unknown setting; known settings are " + ", ".join(FIELD_NAMES)
                )
        values: dict[str, object] = {name: getattr(self, name) for name in FIELD_NAMES}
        values.update(changes)
        derived = {name for name in self._derived if name not in changes}
        if "sessions" in changes:
            # Checked first, so that a bad count is blamed on itself, not on the reserve.
            sessions = cast(
                int, FIELD_BY_NAME["sessions"].check("sessions", changes["sessions"], self)
            )
            if "reserve" not in changes:
                fit = derived_reserve(sessions) if "reserve" in derived else sessions - 1
                values["reserve"] = min(self.reserve, fit)
            if "per_principal" not in changes:
                fit = derived_per_principal(sessions) if "per_principal" in derived else sessions
                values["per_principal"] = min(self.per_principal, fit)
            if "min_sessions" not in changes and self.min_sessions is not None:
                # A floor above the new ceiling is lowered onto it: a fixed count,
                # never a raised floor and never a setting silently dropped.
                values["min_sessions"] = min(self.min_sessions, sessions)
        for setting in FIELDS:
            if setting.name in derived and setting.scope is not Scope.OPERATOR:
                # Only an operator's choices are never silently raised; a derived
                # environment value (the hold) follows its rule, e.g. a changed wait.
                values[setting.name] = None
                derived.discard(setting.name)
        return SchedulerSettings._from_values(values, derived=frozenset(derived))

    def keeping_environment_only(self, running: SchedulerSettings) -> SchedulerSettings:
        """These settings with the fields that size memory taken from ``running``.

        Queue lengths, the per-request places and the third-party hold are fixed at
        start-up (R-SET-1): a change at run time must not resize what was reserved.
        """
        kept = {
            setting.name: getattr(running, setting.name)
            for setting in FIELDS
            if setting.scope is Scope.START_UP
        }
        return dataclasses.replace(self, **kept)

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
            name: None if name in self._derived else getattr(self, name) for name in FIELD_NAMES
        }

    def _setup(self, values: Mapping[str, object], *, derived: frozenset[str]) -> None:
        """Check every value and resolve the derived ones; the only way fields get set.

        Fields are checked in the order of FIELDS and set as they pass, so a check or a
        rule reads the fields before it on ``self``. ``derived`` names fields whose
        given value was computed from their rule (a lowered derived value) so that
        they stay marked as derived.
        """
        marks = set(derived & DERIVABLE)
        for setting in FIELDS:
            value = values[setting.name]
            if value is None and setting.derive is not None:
                value = setting.derive(self)
                marks.add(setting.name)
            object.__setattr__(self, setting.name, setting.check(setting.name, value, self))
        object.__setattr__(self, "_derived", frozenset(marks))
        rules = AdmissionRules(
            self.strategy, self.session_min_bytes, dict(self.service_account_classes)
        )
        object.__setattr__(self, "_admission_rules", rules)
