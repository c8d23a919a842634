"""Every operator setting has its input on the operator page, of the right type and bounds.

The field catalogue (``settings._fields.FIELDS``) is the one place a setting is
described; the page's form is written by hand. This test holds the two together, so a
new operator setting fails here until the page can show and send it (issue #27):

- every operator field has a control, and every control names an operator field;
- a whole number is an ``<input type=number step=1>`` the page sends as an integer, a
  decimal one with ``step=any`` sent as a number, a flag a checkbox, the strategy a
  ``<select>`` of exactly the strategies; a field that may be unset (``None``) sends an
  empty input as ``null``;
- the ``min``/``max`` the page states are the bounds the settings check enforces.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib.resources import files
from typing import Any, get_args, get_type_hints

import pytest

from arkvory_sched import SchedulerSettings, SettingsError, Strategy
from arkvory_sched.settings._fields import FIELDS, SettingField

STATIC = files("arkvory_sched.console") / "static"
PAGE = (STATIC / "operator.html").read_text(encoding="utf-8")
FORM_FIELDS_JS = (STATIC / "form_fields.js").read_text(encoding="utf-8")

#: Fields with an editor of their own instead of one input (form_editors.js).
EDITORS = {"classWindows": "windows-editor", "serviceAccountClasses": "accounts-editor"}


class _Controls(HTMLParser):
    """The form's inputs and selects by ``data-field`` / ``data-weight``, and all ids."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, dict[str, str | None]] = {}
        self.weights: list[dict[str, str | None]] = []
        self.ids: set[str] = set()
        self.options: dict[str, list[str]] = {}
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs) | {"tag": tag}
        if attributes.get("id"):
            self.ids.add(str(attributes["id"]))
        if "data-field" in attributes:
            name = str(attributes["data-field"])
            self.fields[name] = attributes
            if tag == "select":
                self._select = name
                self.options[name] = []
        elif "data-weight" in attributes:
            self.weights.append(attributes)
        elif tag == "option" and self._select is not None:
            self.options[self._select].append(str(attributes.get("value")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


CONTROLS = _Controls()
CONTROLS.feed(PAGE)
OPERATOR = [setting for setting in FIELDS if setting.record_name is not None]
DEFAULTS = SchedulerSettings()


def _js_set(name: str) -> set[str]:
    found = re.search(rf"const {name} = new Set\(\[([^\]]*)\]\)", FORM_FIELDS_JS)
    assert found, f"form_fields.js no longer declares {name}"
    return set(re.findall(r'"([A-Za-z]+)"', found.group(1)))


def _example(setting: SettingField) -> Any:  # as untyped as the getattr it stands for
    """A value of the field's type: its default, or for a field unset by default (an
    ``int | None``), a zero of the type it holds when set."""
    value = getattr(DEFAULTS, setting.name)
    if value is not None:
        return value
    hint = get_type_hints(SchedulerSettings)[setting.name]
    (kind,) = [kind for kind in get_args(hint) if kind is not type(None)]
    return kind()


def _accepts(setting: SettingField, value: object) -> bool:
    try:
        DEFAULTS.with_changes(**{setting.name: value})
    except SettingsError:
        return False
    return True


def test_every_operator_field_has_a_control_and_every_control_a_field() -> None:
    names = {str(setting.record_name) for setting in OPERATOR}
    missing = [
        name
        for name in names
        if name not in CONTROLS.fields
        and not (name == "weights" and CONTROLS.weights)
        and EDITORS.get(name) not in CONTROLS.ids
    ]
    assert missing == []
    assert set(CONTROLS.fields) <= names


@pytest.mark.parametrize("setting", OPERATOR, ids=lambda setting: setting.name)
def test_each_control_has_the_fields_type(setting: SettingField) -> None:
    name = str(setting.record_name)
    value = _example(setting)
    # Unset is a value of its own: an empty input must send null, not "" or nothing.
    assert (getattr(DEFAULTS, setting.name) is None) == (name in _js_set("OPTIONAL"))
    if name in EDITORS:
        return  # a structured value: its editor is tested in the browser suite
    if name == "weights":
        assert len(CONTROLS.weights) == len(value)
        assert all(
            control["type"] == "number" and control["step"] == "1" for control in CONTROLS.weights
        )
        return
    control = CONTROLS.fields[name]
    if isinstance(value, Strategy):
        assert control["tag"] == "select"
        assert CONTROLS.options[name] == [strategy.value for strategy in Strategy]
    elif isinstance(value, bool):
        assert control["type"] == "checkbox"
    elif isinstance(value, int):
        assert (control["type"], control["step"]) == ("number", "1")
        assert name in _js_set("INTEGER")
    elif isinstance(value, float):
        assert (control["type"], control["step"]) == ("number", "any")
        assert name in _js_set("DECIMAL")
    else:
        pytest.fail(f"{name}: no control type known for {type(value).__name__}")


def _bounded() -> list[tuple[SettingField, str, str]]:
    found = []
    for setting in OPERATOR:
        control = CONTROLS.fields.get(str(setting.record_name))
        for bound in ("min", "max"):
            if control is not None and control.get(bound) is not None:
                found.append((setting, bound, str(control[bound])))
    by_weight = next(setting for setting in OPERATOR if setting.name == "weights")
    for bound in ("min", "max"):
        values = {control[bound] for control in CONTROLS.weights}
        assert len(values) == 1, f"the four weights state different {bound} values"
        found.append((by_weight, bound, str(values.pop())))
    return found


@pytest.mark.parametrize(
    ("setting", "bound", "stated"),
    _bounded(),
    ids=lambda value: value.name if isinstance(value, SettingField) else str(value),
)
def test_the_stated_bounds_are_the_checked_ones(
    setting: SettingField, bound: str, stated: str
) -> None:
    """The bound is accepted and one step past it is refused (an open lower bound of
    a decimal: the bound itself is refused and anything above it accepted)."""
    value = _example(setting)
    number = float(stated)
    step = 1 if setting.name == "weights" or isinstance(value, int) else 0.001
    past = number - step if bound == "min" else number + step

    def shaped(raw: float) -> object:
        if setting.name == "weights":
            return (int(raw),) * len(value)
        return int(raw) if isinstance(value, int) else raw

    assert not _accepts(setting, shaped(past))
    if _accepts(setting, shaped(number)):
        return
    assert bound == "min" and isinstance(value, float), "an open bound only for decimals"
    assert _accepts(setting, shaped(number + step))
