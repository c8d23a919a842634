"""Reading scheduler settings from ``ARKVORY_*`` environment variables.

The environment is read once, at start-up (R-SET-1), by walking :data:`FIELDS`: each
field names its variable and the parser for its text. What comes out is a set of plain
values for :class:`~._settings.SchedulerSettings` to check, plus a note of which
variable gave which field, so that a value that cannot work stops start-up with a
:class:`ConfigurationError` naming the variable an operator has to fix — which is not
always the field that failed (a reserve that no longer fits after
``ARKVORY_MAX_DOWNLOAD_SESSIONS`` was lowered is that variable's fault).

The configuration table of ``docs/configuration.md`` is generated from the same list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .._exceptions import ConfigurationError, SettingsError
from ._fields import FIELD_BY_NAME, FIELDS, show_value
from ._parsing import UnparsableError

__all__ = ["EnvironmentReading", "configuration_table", "read_environment"]

_FIELD_OF: Final[Mapping[str, str]] = MappingProxyType(
    {setting.variable: setting.name for setting in FIELDS}
)


@dataclass(frozen=True, slots=True)
class EnvironmentReading:
    """Field values read from the environment, and where each set one came from.

    ``values`` holds every field: the parsed value where a variable was set, the
    default (``None`` for a field that follows its rule) where not. ``given`` maps each
    field taken from a variable to that variable and its raw text.
    """

    values: Mapping[str, object]
    given: Mapping[str, tuple[str, str]]

    def blame(self, error: SettingsError) -> ConfigurationError:
        """Turn a field's validation error into one that names the variable to fix.

        The error's ``field`` is the blamed variable's own field: a bad
        ``ARKVORY_MAX_DOWNLOADS`` fails first as the session count it also defaults,
        but ``max_downloads`` is what the operator wrote.
        """
        given = self.given
        # A structured setting names the spot inside its value: class_windows/bulk/...
        own, _, inside = error.field.partition("/")
        if own in given:
            variable, raw = given[own]
            where = f" at {inside}" if inside else ""
            return ConfigurationError(
                variable,
                error.field if inside else _FIELD_OF[variable],
                f"{variable}={show_value(raw)}{where}: {error.message}",
            )
        setting = FIELD_BY_NAME.get(error.field)
        cause = None if setting is None else setting.depends_on
        if setting is not None and cause is not None and cause in given:
            variable, raw = given[cause]
            return ConfigurationError(
                variable,
                _FIELD_OF[variable],
                f"{variable}={show_value(raw)} does not fit the default {error.field} "
                f"({error.field} {error.message}); set {setting.variable} as well",
            )
        variable = error.field if setting is None else setting.variable
        return ConfigurationError(variable, error.field, f"{variable} (default): {error.message}")


def read_environment(
    environ: Mapping[str, str], defaults: Mapping[str, object]
) -> EnvironmentReading:
    """Parse every set ``ARKVORY_*`` variable over ``defaults``; unset or blank ones keep it.

    Raises :class:`ConfigurationError` for text that is not even the right kind of
    value; ranges and the fields' relations are checked later, by the settings.
    """
    values = dict(defaults)
    given: dict[str, tuple[str, str]] = {}
    for setting in FIELDS:
        raw = environ.get(setting.variable, "")
        text = raw.strip()
        if not text:
            continue
        try:
            parsed = setting.parse(text)
        except UnparsableError as error:
            raise ConfigurationError(
                setting.variable,
                setting.name,
                f"{setting.variable}={show_value(raw)}: expected {error.expected}",
            ) from None
        values[setting.name] = parsed
        given[setting.name] = (setting.variable, raw)
    for setting in FIELDS:
        source = setting.falls_back_to
        if source is not None and setting.name not in given and source in given:
            values[setting.name] = values[source]
            given[setting.name] = given[source]
    return EnvironmentReading(MappingProxyType(values), MappingProxyType(given))


def configuration_table() -> str:
    """The Markdown table of ``docs/configuration.md``; a test keeps the two equal."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    lines += [
        f"| `{setting.variable}` | {setting.default_text} | {setting.meaning} |"
        for setting in FIELDS
    ]
    return "\n".join(lines) + "\n"
