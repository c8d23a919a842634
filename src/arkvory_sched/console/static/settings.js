// The settings form as a whole: load, save with the revision it was read at, and the
// two ways a save is refused.
//
// * 400: every bad field is marked from the API's invalidParams (JSON pointers):
//   aria-invalid, the server's message under the field, focus on the first one.
// * 409: someone saved since this page read the settings. The page says who, lists
//   what they changed (its own read against the current record), and offers to load
//   the current settings while keeping everything the operator typed.
// Nothing is ever saved partly: the record goes in one PUT, or not at all.

import { AccountsEditor, WindowsEditor } from "./form_editors.js";
import { ScalarFields } from "./form_fields.js";
import { clock, el, fill, shown } from "./format.js";
import { problemText } from "./http.js";

export class SettingsPanel {
  constructor(api, canWrite, onSaved) {
    this.api = api;
    this.canWrite = canWrite;
    this.onSaved = onSaved;
    this.base = null;
    this.form = document.getElementById("settings-form");
    this.message = document.getElementById("save-message");
    this.conflict = document.getElementById("conflict");
    this.meta = document.getElementById("settings-meta");
    this.dirtyNote = document.getElementById("dirty-note");
    const changed = () => this.changed();
    this.fields = new ScalarFields(this.form, changed);
    this.windows = new WindowsEditor(document.getElementById("windows-editor"), changed);
    this.accounts = new AccountsEditor(document.getElementById("accounts-editor"), changed);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
    document.getElementById("discard").addEventListener("click", () => {
      this.clearInvalid();
      this.hide(this.conflict);
      this.load(this.base);
    });
    document.getElementById("reload-keep").addEventListener("click", () => this.reloadKeepingInput());
    document.getElementById("readonly-note").hidden = canWrite;
  }

  dirtyParts() {
    const parts = this.fields.dirtyNames();
    if (this.windows.dirty()) parts.push("classWindows");
    if (this.accounts.dirty()) parts.push("serviceAccountClasses");
    return parts;
  }

  changed() {
    const parts = this.dirtyParts();
    this.dirtyNote.textContent = parts.length ? `Unsaved changes: ${parts.join(", ")}` : "";
  }

  /** Fill the form from a settings document (``keep``: keep what the operator typed). */
  load(document, keep = false) {
    this.base = document;
    this.fields.load(document, keep);
    this.windows.load(document.settings.classWindows, keep);
    this.accounts.load(document.settings.serviceAccountClasses, keep);
    const by = document.updatedBy ? ` by ${document.updatedBy}` : "";
    const at = document.updatedAt ? ` at ${clock(document.updatedAt)}` : "";
    const applied = document.appliedRevision === document.revision
      ? "in force in this process"
      : `this process runs revision ${document.appliedRevision}`;
    const problems = (document.problems || []).length ? ` Problems: ${document.problems.join(" ")}` : "";
    this.meta.textContent = document.revision
      ? `Revision ${document.revision}, saved${by}${at}; ${applied}.${problems}`
      : `Revision 0: every value is the environment's.${problems}`;
    this.meta.dataset.revision = String(document.revision);
    this.applyRole();
    this.changed();
  }

  /** A viewer's form shows the values with no control enabled. */
  applyRole() {
    if (this.canWrite) return;
    for (const control of this.form.querySelectorAll("input, select, button, textarea, fieldset")) {
      control.disabled = true;
    }
  }

  /** Called by the poller: a newer revision is loaded at once into an untouched form;
   * into an edited one it is announced, like a 409, and nothing is overwritten. */
  async poll() {
    const answer = await this.api.get("/settings");
    if (!answer.ok) return answer;
    const current = answer.body;
    if (this.base === null) {
      this.load(current);
    } else if (current.revision !== this.base.revision) {
      if (this.dirtyParts().length === 0) this.load(current);
      else if (this.conflict.hidden) this.showConflict(current, current.updatedBy, false);
    } else if (current.appliedRevision !== this.base.appliedRevision) {
      this.load(current, true);
    }
    return answer;
  }

  /** The body of the PUT: the record, plus the revision it replaces. */
  body() {
    const record = this.fields.record();
    const stored = this.base.record || {};
    if ("classWindows" in stored || this.windows.dirty()) record.classWindows = this.windows.read();
    const accounts = this.accounts.read();
    if (accounts.duplicate) return accounts;
    if ("serviceAccountClasses" in stored || this.accounts.dirty()) record.serviceAccountClasses = accounts.classes;
    return { record: { expectedRevision: this.base.revision, ...record } };
  }

  async save() {
    if (!this.canWrite || this.base === null) return;
    this.clearInvalid();
    this.hide(this.message);
    const built = this.body();
    if (built.duplicate) {
      this.markInvalid([{ id: built.duplicate, reason: `${built.name || "(empty)"} is listed twice` }]);
      this.say("bad", "Nothing was saved: a service account is listed twice.");
      return;
    }
    const save = document.getElementById("save");
    save.disabled = true;
    try {
      const answer = await this.api.put("/settings", built.record);
      if (answer.ok) {
        this.hide(this.conflict);
        this.load(answer.body);
        this.say("ok", `Saved as revision ${answer.body.revision}; in force in this process, in the others within 10 s.`);
        this.onSaved();
      } else if (answer.status === 400 && answer.body && answer.body.invalidParams) {
        const params = answer.body.invalidParams.map((p) => ({ pointer: p.name, reason: p.reason }));
        const unplaced = this.markInvalid(params);
        this.say("bad", `Nothing was saved: ${params.length} field(s) need a change.`, unplaced);
        this.onSaved();
      } else if (answer.status === 409) {
        const current = await this.api.get("/settings");
        const who = answer.body ? answer.body.updatedBy : null;
        this.showConflict(current.ok ? current.body : null, who, true);
        this.onSaved();
      } else {
        this.say("bad", `Nothing was saved. ${problemText(answer)}`);
      }
    } catch (error) {
      this.say("bad", `Nothing was saved: the API cannot be reached (${error.message}).`);
    } finally {
      save.disabled = false;
    }
  }

  /** Say who changed the settings and what, from this page's read to ``current``. */
  showConflict(current, who, refused) {
    const name = who || (current && current.updatedBy) || "someone";
    const revision = current ? current.revision : "?";
    const read = this.base.revision;
    const lead = refused ? "Nothing was saved: " : "";
    document.getElementById("conflict-text").textContent =
      `${lead}${name} changed the settings (revision ${revision}${current && current.updatedAt ? `, ${clock(current.updatedAt)}` : ""}) after this page read revision ${read}. What they changed:`;
    const changes = current ? diff(this.base.settings, current.settings) : [];
    fill(document.getElementById("conflict-changes"), changes.length
      ? changes.map((line) => el("li", { text: line }))
      : [el("li", { text: "no visible value (a field was set to the value it had)" })]);
    this.conflict.hidden = false;
    this.pending = current;
    if (refused) this.conflict.querySelector("button").focus();
  }

  async reloadKeepingInput() {
    const answer = await this.api.get("/settings");
    if (!answer.ok) {
      this.say("bad", `Cannot load the current settings. ${problemText(answer)}`);
      return;
    }
    this.hide(this.conflict);
    this.clearInvalid();
    this.load(answer.body, true);
    this.say("ok", `Loaded revision ${answer.body.revision}. Your changes are kept: check them and save again.`);
  }

  /** Mark each parameter's control; returns the messages that fit no control. */
  markInvalid(params) {
    const controls = [...this.form.querySelectorAll("[data-pointer]")];
    const unplaced = [];
    const marked = [];
    for (const param of params) {
      const control = param.id ? document.getElementById(param.id) : findControl(controls, param.pointer);
      if (!control) {
        unplaced.push(`${param.pointer}: ${param.reason}`);
        continue;
      }
      control.setAttribute("aria-invalid", "true");
      const errorId = `${control.id}-error`;
      let error = document.getElementById(errorId);
      if (!error) {
        error = el("p", { className: "error", id: errorId });
        (control.closest(".field") || control.closest("label") || control).after(error);
      }
      error.textContent = error.textContent ? `${error.textContent}; ${param.reason}` : param.reason;
      control.setAttribute("aria-describedby", errorId);
      marked.push(control);
    }
    marked.sort((a, b) => (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
    if (marked.length) marked[0].focus();
    return unplaced;
  }

  clearInvalid() {
    for (const control of this.form.querySelectorAll('[aria-invalid="true"]')) {
      control.removeAttribute("aria-invalid");
      control.removeAttribute("aria-describedby");
    }
    for (const error of this.form.querySelectorAll(".error")) error.remove();
  }

  say(kind, text, details = []) {
    this.message.className = `message ${kind}`;
    fill(this.message, el("span", { text }), details.length ? el("ul", {}, details.map((d) => el("li", { text: d }))) : null);
    this.message.hidden = false;
  }

  hide(node) {
    node.hidden = true;
  }
}

/** The control of a JSON pointer, or of the nearest enclosing one. */
function findControl(controls, pointer) {
  let current = pointer;
  while (current) {
    const exact = controls.find((c) => c.dataset.pointer === current);
    if (exact) return exact;
    const inside = controls.find((c) => c.dataset.pointer.startsWith(`${current}/`));
    if (inside) return inside;
    current = current.slice(0, current.lastIndexOf("/"));
  }
  return null;
}

/** "weights: 8, 4, 2, 1 → 8, 6, 2, 1" for each setting that differs. These are values in
 * force, so a null is an optional setting left unset (minSessions), not "the environment". */
export function diff(before, after) {
  const lines = [];
  const show = (value, name) => (value === null ? "unset" : shown(value, name));
  for (const name of Object.keys({ ...before, ...after })) {
    const a = JSON.stringify(before[name]);
    const b = JSON.stringify(after[name]);
    if (a !== b) lines.push(`${name}: ${show(before[name], name)} → ${show(after[name], name)}`);
  }
  return lines;
}
