// The two list editors of the settings form: class windows (R-WIN-2) and
// service-account classes (R-CLASS-6). Each renders rows from the record, reads them
// back, and knows whether the operator changed them. Every control carries the JSON
// pointer the API would use for it (data-pointer), so a 400 can mark it.

import { CLASSES, WINDOWED_CLASSES, el, fill } from "./format.js";

const WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const WORKDAYS = WEEKDAYS.slice(0, 5);
const ZONES = ["UTC", "Europe/Berlin", "Europe/London", "Europe/Paris", "America/New_York",
  "America/Chicago", "America/Los_Angeles", "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney"];

/** The reader's own zone name, the default for a new window (a name, no arithmetic). */
function ownZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
}

/** ``~`` and ``/`` escaped as in a JSON pointer (RFC 6901). */
export function pointerPart(text) {
  return text.replaceAll("~", "~0").replaceAll("/", "~1");
}

function field(id, labelText, control) {
  return el("div", { className: "field" }, el("label", { for: id, text: labelText }), control);
}

export class WindowsEditor {
  constructor(container, onChange) {
    this.container = container;
    this.onChange = onChange;
    this.loaded = "{}";
    this.state = {};
    container.addEventListener("input", () => onChange());
    container.addEventListener("change", () => onChange());
    const zones = el("datalist", { id: "zones" }, [...new Set([ownZone(), ...ZONES])].map((z) => el("option", { value: z })));
    container.after(zones);
  }

  /** Rows from the record's ``classWindows`` (effective settings). */
  load(classWindows, keep = false) {
    const loaded = JSON.stringify(normalise(classWindows || {}));
    if (!(keep && this.dirty())) {
      this.state = JSON.parse(loaded);
      this.render();
    }
    this.loaded = loaded;
  }

  dirty() {
    return JSON.stringify(this.read()) !== this.loaded;
  }

  render() {
    const sections = WINDOWED_CLASSES.map((cls) => this.renderClass(cls, this.state[cls] || { windows: [], outsideShare: 0 }));
    fill(this.container, sections);
  }

  renderClass(cls, entry) {
    const rows = entry.windows.map((window, index) => this.renderWindow(cls, index, window));
    const add = el("button", { type: "button", id: `cw-${cls}-add`, text: `Add a window for ${cls}` });
    add.addEventListener("click", () => {
      this.capture();
      const current = this.state[cls] || { windows: [], outsideShare: 0 };
      current.windows.push({ weekdays: [...WORKDAYS], start: "22:00", end: "06:00", zone: ownZone() });
      this.state[cls] = current;
      this.render();
      this.onChange();
      document.getElementById(`cw-${cls}-${current.windows.length - 1}-wd-mon`)?.focus();
    });
    // The outside share means something only for a class with windows; a class without
    // has no such field, so nothing typed there could be dropped on save.
    const shareId = `cw-${cls}-share`;
    const share = entry.windows.length
      ? field(shareId, `Outside share of ${cls} (0–1)`, el("input", {
        id: shareId, type: "number", min: "0", max: "1", step: "0.05", inputmode: "decimal",
        value: String(entry.outsideShare ?? 0), "data-pointer": `/classWindows/${cls}/outsideShare`,
      }))
      : null;
    return el(
      "div",
      { className: "class-windows", "data-class": cls },
      el("h3", { text: entry.windows.length ? `${cls}: ${entry.windows.length} window(s)` : `${cls}: no windows (always open)` }),
      rows,
      el("div", { className: "row-actions" }, add, share),
    );
  }

  renderWindow(cls, index, window) {
    const base = `cw-${cls}-${index}`;
    const pointer = `/classWindows/${cls}/windows/${index}`;
    const days = el(
      "fieldset",
      { className: "weekdays" },
      el("legend", { text: `Weekdays of ${cls} window ${index + 1}` }),
      WEEKDAYS.map((day, i) => {
        const id = `${base}-wd-${day}`;
        const box = el("input", { type: "checkbox", id, value: day, checked: window.weekdays.includes(day) });
        if (i === 0) box.dataset.pointer = `${pointer}/weekdays`;
        return el("label", { for: id }, box, day);
      }),
    );
    const time = (part, labelText) => {
      const id = `${base}-${part}`;
      return field(id, labelText, el("input", { id, type: "time", value: window[part], required: true, "data-pointer": `${pointer}/${part}` }));
    };
    const zoneId = `${base}-zone`;
    const zone = field(zoneId, "Time zone", el("input", { id: zoneId, type: "text", list: "zones", value: window.zone, autocomplete: "off", spellcheck: "false", "data-pointer": `${pointer}/zone` }));
    const remove = el("button", { type: "button", id: `${base}-remove`, text: "Remove", "aria-label": `Remove ${cls} window ${index + 1}` });
    remove.addEventListener("click", () => {
      this.capture();
      this.state[cls].windows.splice(index, 1);
      this.render();
      this.onChange();
      document.getElementById(`cw-${cls}-add`)?.focus();
    });
    return el("div", { className: "window-row", "data-window": `${cls}-${index}` }, days, time("start", "Opens"), time("end", "Closes"), zone, el("div", {}, remove));
  }

  /** Keep what is typed before re-rendering rows. */
  capture() {
    this.state = this.readAll();
  }

  readAll() {
    const state = {};
    for (const cls of WINDOWED_CLASSES) {
      const section = this.container.querySelector(`[data-class="${cls}"]`);
      if (!section) continue;
      const windows = [...section.querySelectorAll(".window-row")].map((row) => ({
        weekdays: [...row.querySelectorAll('input[type="checkbox"]')].filter((box) => box.checked).map((box) => box.value),
        start: row.querySelector('input[id$="-start"]').value,
        end: row.querySelector('input[id$="-end"]').value,
        zone: row.querySelector('input[id$="-zone"]').value.trim(),
      }));
      const shareText = (section.querySelector(`#cw-${cls}-share`)?.value ?? "").trim();
      const share = shareText === "" ? 0 : Number(shareText);
      state[cls] = { windows, outsideShare: Number.isFinite(share) ? share : shareText };
    }
    return state;
  }

  /** ``classWindows`` as the record stores it: only classes that have windows. */
  read() {
    return normalise(this.readAll());
  }
}

function normalise(classWindows) {
  const result = {};
  for (const cls of CLASSES) {
    const entry = classWindows[cls];
    if (entry && entry.windows && entry.windows.length) {
      result[cls] = { windows: entry.windows.map((w) => ({ weekdays: w.weekdays, start: w.start, end: w.end, zone: w.zone })), outsideShare: entry.outsideShare ?? 0 };
    }
  }
  return result;
}

export class AccountsEditor {
  constructor(container, onChange) {
    this.container = container;
    this.onChange = onChange;
    this.rows = [];
    this.loaded = "{}";
    container.addEventListener("input", (event) => {
      const row = event.target.closest(".account-row");
      if (row && event.target.matches('input[type="text"]')) {
        event.target.dataset.pointer = `/serviceAccountClasses/${pointerPart(event.target.value.trim())}`;
      }
      onChange();
    });
    container.addEventListener("change", () => onChange());
  }

  load(classes, keep = false) {
    const loaded = JSON.stringify(sortedObject(classes || {}));
    if (!(keep && this.dirty())) {
      this.rows = Object.entries(JSON.parse(loaded));
      this.render();
    }
    this.loaded = loaded;
  }

  dirty() {
    return JSON.stringify(sortedObject(Object.fromEntries(this.readRows()))) !== this.loaded;
  }

  render() {
    const rows = this.rows.map(([name, cls], index) => {
      const nameId = `sa-${index}-name`;
      const classId = `sa-${index}-class`;
      const select = el("select", { id: classId }, CLASSES.map((c) => el("option", { value: c, text: c, selected: c === cls })));
      const remove = el("button", { type: "button", text: "Remove", "aria-label": `Remove ${name || "this account"}` });
      remove.addEventListener("click", () => {
        this.rows = this.readRows();
        this.rows.splice(index, 1);
        this.render();
        this.onChange();
        document.getElementById("sa-add")?.focus();
      });
      return el(
        "div",
        { className: "account-row" },
        field(nameId, "Service account or link", el("input", { id: nameId, type: "text", value: name, autocomplete: "off", spellcheck: "false", "data-pointer": `/serviceAccountClasses/${pointerPart(name)}` })),
        field(classId, "Class", select),
        el("div", {}, remove),
      );
    });
    const add = el("button", { type: "button", id: "sa-add", text: "Add a service account" });
    add.addEventListener("click", () => {
      this.rows = this.readRows();
      this.rows.push(["", "background"]);
      this.render();
      this.onChange();
      document.getElementById(`sa-${this.rows.length - 1}-name`)?.focus();
    });
    fill(this.container, rows.length ? rows : [el("p", { className: "note", text: "No service account has a class of its own." })], el("div", { className: "row-actions" }, add));
  }

  readRows() {
    return [...this.container.querySelectorAll(".account-row")].map((row) => [
      row.querySelector('input[type="text"]').value.trim(),
      row.querySelector("select").value,
    ]);
  }

  /** The rows as the record's ``serviceAccountClasses``, or the id of a name listed
   * twice (an object cannot hold it twice, and dropping one would save silently). */
  read() {
    const result = {};
    const rows = this.readRows();
    for (const [index, [name, cls]] of rows.entries()) {
      if (Object.hasOwn(result, name)) return { duplicate: `sa-${index}-name`, name };
      result[name] = cls;
    }
    return { classes: result };
  }
}

function sortedObject(object) {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
