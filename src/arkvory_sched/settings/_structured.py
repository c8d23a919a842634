"""The two structured operator settings: class windows and service-account classes.

Both are part of the one settings record (R-SET-1, R-CLASS-6; ADR 0022): an operator
changes them with the same revision, they go through the same validation, and one
audit entry shows a change of weights and windows made together. Here they are
checked and turned into immutable values the scheduler reads without further checks,
and back into the JSON shape the record and the API show.

``classWindows`` maps a class name to ``{"windows": [...], "outsideShare": 0.0}``
(:func:`~.policy.parse_windows` reads each window). ``interactive`` takes no windows:
people are never scheduled by the clock, and its reserve stays as it is.
``serviceAccountClasses`` maps a principal name (a service account or a link) to the
class it is admitted in; a client header may still only lower it.

A check accepts the JSON shape (from the record, the API or an environment variable)
and the value it produced before (``with_changes`` hands the current values back in).
Errors name the place inside the value, ``class_windows/bulk/windows/0/zone``, which the
API turns into the JSON pointer ``/classWindows/bulk/windows/0/zone``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from .._classes import DownloadClass
from .._exceptions import SettingsError
from ..policy import WEEKDAYS, ClassSchedule, ClassSchedules, parse_windows
from ._parsing import UnparsableError

__all__ = [
    "PrincipalClasses",
    "check_class_windows",
    "check_principal_classes",
    "class_windows_json",
    "parse_json_setting",
    "principal_classes_json",
]

_MAX_PRINCIPALS: Final = 10_000
_MAX_WINDOWS: Final = 32
_MAX_NAME: Final = 256


#: Operator-set base classes by principal name, sorted by name.
PrincipalClasses = tuple[tuple[str, DownloadClass], ...]


def check_class_windows(name: str, value: object, earlier: object) -> ClassSchedules:
    """``classWindows`` as the scheduler reads it, or :class:`SettingsError` naming the spot."""
    if isinstance(value, tuple):
        return value  # produced by this check before (``with_changes`` passes it back)
    if not isinstance(value, Mapping):
        raise SettingsError(name, "must be an object mapping a class to its windows")
    schedules: dict[DownloadClass, ClassSchedule] = {}
    for class_name, entry in value.items():
        where = f"{name}/{class_name}"
        cls = _class_named(class_name, where)
        if cls is DownloadClass.INTERACTIVE:
            raise SettingsError(
                where, "interactive has no windows: people are never scheduled by the clock"
            )
        if not isinstance(entry, Mapping):
            raise SettingsError(where, 'must be an object {"windows": [...], "outsideShare": 0}')
        unknown = sorted(set(entry) - {"windows", "outsideShare"})
        if unknown:
            raise SettingsError(f"{where}/{unknown[0]}", "is not a field of a class's windows")
        windows = parse_windows(entry.get("windows", []), f"{where}/windows")
        if len(windows) > _MAX_WINDOWS:
            raise SettingsError(f"{where}/windows", f"at most {_MAX_WINDOWS} windows per class")
        share = entry.get("outsideShare", 0.0)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise SettingsError(
                f"{where}/outsideShare", f"must be a number from 0 to 1, got {share!r}"
            )
        if windows:
            schedules[cls] = ClassSchedule(windows, float(share))
    return tuple(sorted(schedules.items(), key=lambda item: item[0].rank))


def check_principal_classes(name: str, value: object, earlier: object) -> PrincipalClasses:
    """``serviceAccountClasses`` as the scheduler reads it, or :class:`SettingsError`."""
    if isinstance(value, tuple):
        return value
    if not isinstance(value, Mapping):
        raise SettingsError(name, "must be an object mapping a principal to a class")
    if len(value) > _MAX_PRINCIPALS:
        raise SettingsError(name, f"at most {_MAX_PRINCIPALS} principals")
    classes: dict[str, DownloadClass] = {}
    for principal, class_name in value.items():
        where = f"{name}/{principal}"
        if not isinstance(principal, str) or not principal or len(principal) > _MAX_NAME:
            raise SettingsError(where, f"a principal name is 1 to {_MAX_NAME} characters")
        classes[principal] = _class_named(class_name, where)
    return tuple(sorted(classes.items()))


def class_windows_json(value: object) -> object:
    """``classWindows`` back in the record's JSON shape."""
    schedules: ClassSchedules = value  # type: ignore[assignment]
    return {
        cls.value: {
            "windows": [
                {
                    "weekdays": [WEEKDAYS[day] for day in sorted(window.weekdays)],
                    "start": window.start.strftime("%H:%M"),
                    "end": window.end.strftime("%H:%M"),
                    "zone": window.zone,
                }
                for window in schedule.windows
            ],
            "outsideShare": schedule.outside_share,
        }
        for cls, schedule in schedules
    }


def principal_classes_json(value: object) -> object:
    """``serviceAccountClasses`` back in the record's JSON shape."""
    classes: PrincipalClasses = value  # type: ignore[assignment]
    return {principal: cls.value for principal, cls in classes}


def parse_json_setting(text: str) -> object:
    """An environment variable holding the record's JSON shape of a setting."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise UnparsableError(f"a JSON object ({error})") from None


def _class_named(value: object, where: str) -> DownloadClass:
    if isinstance(value, str) and value in _CLASS_NAMES:
        return DownloadClass(value)
    raise SettingsError(
        where,
        f"unknown class {value!r}; expected one of " + ", ".join(_CLASS_NAMES),
    )


_CLASS_NAMES: Final = tuple(cls.value for cls in DownloadClass)
