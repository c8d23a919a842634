// The audit trail (GET /settings/history): every change and every refused attempt.

import { clock, el, fill, shown } from "./format.js";

const OUTCOMES = { applied: "applied", revision_mismatch: "refused: stale revision", invalid: "refused: invalid" };

function changeList(change) {
  const names = Object.keys(change || {});
  if (!names.length) return el("span", { className: "note", text: "no field changed" });
  return el(
    "ul",
    { className: "changes" },
    names.map((name) => el("li", { text: `${name}: ${shown(change[name].from, name)} → ${shown(change[name].to, name)}` })),
  );
}

/** Fill the audit table with ``entries`` (newest first). */
export function renderAudit(tbody, entries) {
  if (!entries.length) {
    fill(tbody, el("tr", {}, el("td", { colspan: "5", className: "empty", text: "Nothing changed yet: the settings are the environment's." })));
    return;
  }
  fill(
    tbody,
    entries.map((entry) =>
      el(
        "tr",
        { "data-entry": String(entry.id) },
        el("td", { text: clock(entry.at) }),
        el("td", { text: entry.actor }),
        el("td", { className: `outcome-${entry.outcome}`, text: OUTCOMES[entry.outcome] || entry.outcome }),
        el("td", { className: "num", text: entry.outcome === "applied" ? `${entry.expectedRevision} → ${entry.revision}` : `${entry.expectedRevision} (at ${entry.revision})` }),
        el("td", {}, changeList(entry.change), entry.detail ? el("div", { className: "note", text: entry.detail }) : null),
      ),
    ),
  );
}
