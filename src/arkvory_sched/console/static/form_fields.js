// The scalar settings and the four weights: filled from GET /settings, read back into
// the record to PUT, and compared with what was read to know what the operator typed.
//
// The record stores only what differs from the environment (ADR 0022). So a field goes
// into the PUT body when it is already in the record or the operator changed it; an
// untouched field that comes from the environment stays out, and keeps following the
// environment. "Use the environment's value" takes a field out of the record.

import { el } from "./format.js";

const INTEGER = new Set(["sessions", "minSessions", "reserve", "perPrincipal", "sessionMinBytes", "rangesPerSession"]);
const DECIMAL = new Set(["idleSeconds", "agingMinutes"]);
// Fields whose empty input means "not set" (sent as null), not a number left out.
const OPTIONAL = new Set(["minSessions"]);

function text(control) {
  return control.type === "checkbox" ? String(control.checked) : control.value;
}

function show(control, value) {
  if (control.type === "checkbox") control.checked = Boolean(value);
  else control.value = value === null || value === undefined ? "" : String(value);
}

/** The value to send for a control: numbers as numbers, anything unparsable as typed,
 * so the server names it (the page never drops or fixes an input silently). */
function parsed(name, control) {
  if (control.type === "checkbox") return control.checked;
  const raw = control.value.trim();
  if (INTEGER.has(name) || DECIMAL.has(name) || name === "weights") {
    if (raw === "") return OPTIONAL.has(name) ? null : raw;
    const number = Number(raw);
    return Number.isFinite(number) ? number : raw;
  }
  return control.value;
}

export class ScalarFields {
  constructor(form, onChange) {
    this.controls = new Map();
    for (const control of form.querySelectorAll("[data-field]")) {
      this.controls.set(control.dataset.field, control);
    }
    this.weights = [...form.querySelectorAll("[data-weight]")];
    this.loaded = new Map();
    this.reset = new Set();
    this.document = null;
    for (const [name, control] of this.allControls()) {
      control.addEventListener("input", () => {
        this.reset.delete(name);
        onChange();
      });
      control.addEventListener("change", () => onChange());
    }
    this.onChange = onChange;
  }

  *allControls() {
    yield* this.controls.entries();
    for (const weight of this.weights) yield ["weights", weight];
  }

  currentText(name) {
    if (name === "weights") return this.weights.map(text).join(",");
    return text(this.controls.get(name));
  }

  names() {
    return [...this.controls.keys(), "weights"];
  }

  /** Names the operator changed since the last load. */
  dirtyNames() {
    return this.names().filter((name) => this.reset.has(name) || this.currentText(name) !== this.loaded.get(name));
  }

  /** Fill from a settings document; with ``keep``, fields the operator changed keep
   * what they typed (the reload after a conflict). */
  load(document, keep = false) {
    const typed = new Set(keep ? this.dirtyNames() : []);
    const resets = new Set([...this.reset].filter((name) => typed.has(name)));
    for (const name of this.names()) {
      const value = document.settings[name];
      if (!typed.has(name)) {
        if (name === "weights") this.weights.forEach((control, i) => show(control, value[i]));
        else show(this.controls.get(name), value);
      }
      this.loaded.set(name, name === "weights" ? value.join(",") : text(this.shadow(name, value)));
    }
    this.reset = resets;
    this.document = document;
    this.renderSources();
  }

  /** What a control would read for ``value`` (to compare typed text with the read). */
  shadow(name, value) {
    const control = this.controls.get(name);
    if (control.type === "checkbox") return { type: "checkbox", checked: Boolean(value) };
    return { type: control.type, value: value === null || value === undefined ? "" : String(value) };
  }

  /** The fields of the record to PUT. */
  record() {
    const record = {};
    const stored = this.document ? this.document.record : {};
    const dirty = new Set(this.dirtyNames());
    for (const name of this.names()) {
      if (this.reset.has(name)) continue;
      if (!(name in stored) && !dirty.has(name)) continue;
      record[name] = name === "weights"
        ? this.weights.map((control) => parsed("weights", control))
        : parsed(name, this.controls.get(name));
    }
    return record;
  }

  /** Under each field: where its value comes from, and a way back to the environment. */
  renderSources() {
    const document = this.document;
    for (const name of this.names()) {
      const control = name === "weights" ? this.weights[3] : this.controls.get(name);
      const holder = name === "weights" ? control.closest("fieldset") : control.closest(".field");
      let line = holder.querySelector(":scope > .source-line");
      if (!line) {
        line = el("p", { className: "source-line" });
        holder.append(line);
      }
      const source = document.sources[name] || "environment";
      const adjusted = (document.adjusted || []).includes(name);
      const parts = [];
      if (this.reset.has(name)) {
        parts.push(el("span", { className: "source", text: "will return to the environment's value" }));
      } else if (source === "operator") {
        const back = el("button", { type: "button", className: "link", text: `use the environment's (${shownValue(document.environment[name])})` });
        back.addEventListener("click", () => this.useEnvironment(name));
        parts.push(el("span", { className: "source operator", text: "set by an operator · " }), back);
      } else {
        parts.push(el("span", { className: "source", text: adjusted ? "environment, lowered to fit sessions" : "environment" }));
      }
      line.replaceChildren(...parts);
    }
  }

  useEnvironment(name) {
    const value = this.document.environment[name];
    if (name === "weights") this.weights.forEach((control, i) => show(control, value[i]));
    else show(this.controls.get(name), value);
    this.reset.add(name);
    this.renderSources();
    this.onChange();
  }
}

function shownValue(value) {
  if (value === null || value === undefined) return "unset"; // an optional field (OPTIONAL)
  return Array.isArray(value) ? value.join(", ") : String(value);
}
