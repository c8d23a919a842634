// The queue now: headline figures, the table per class, the active sessions.
// Everything shown is read from GET /state; nothing is computed here but formatting.

import { CLASSES, bytes, clock, duration, el, fill, percent, rate, relative, swatch } from "./format.js";

const REASONS = {
  outside_window: "outside its window",
  no_free_slot: "no free slot",
  reserve: "only the interactive reserve is free",
  at_share: "its first waiter's principal is at its share",
};

/** Why a class is not draining, as a sentence. */
export function reasonText(notDraining, now) {
  if (!notDraining) return null;
  const text = REASONS[notDraining.reason] || notDraining.reason;
  if (notDraining.reason !== "outside_window") return text;
  if (!notDraining.nextOpening) return `${text}; it never opens`;
  return `${text}; opens ${clock(notDraining.nextOpening, now)} (${relative(notDraining.nextOpening, now)})`;
}

function figure(label, value, detail, testId, more = null) {
  return el(
    "div",
    { className: "figure", "data-figure": testId },
    el("div", { className: "label", text: label }),
    el("div", { className: "value", text: value }),
    detail ? el("div", { className: "detail", text: detail }) : null,
    more,
  );
}

function forecastFigure(state, now) {
  const forecast = state.forecast || {};
  if (state.waiting === 0 && state.active === 0) {
    return figure("Queue empties", "empty now", "nothing active or waiting", "forecast");
  }
  if (!forecast.emptiesAt) {
    return figure("Queue empties", "no forecast", "no measured rate yet, or beyond 90 days", "forecast");
  }
  return figure(
    "Queue empties",
    clock(forecast.emptiesAt, now),
    `${relative(forecast.emptiesAt, now)} at the measured rate`,
    "forecast",
  );
}

const CLIENT_KINDS = { protocol: "protocol clients", third_party: "other tools" };

/** The accuracy of each kind of client: protocol clients send a download id, other
 * tools (curl, wget, browsers) do not; the totals alone could hide either. */
function clientAccuracy(accuracy) {
  const byClient = accuracy.byClient || {};
  const parts = Object.entries(CLIENT_KINDS).map(([kind, name]) => {
    const part = byClient[kind] || {};
    const text = part.scored
      ? `${name} ${percent(part.shareInsideInterval)} inside, p95 ${percent(part.relativeErrorP95)} (${part.scored})`
      : `${name} not scored`;
    return el("span", { "data-client": kind, text });
  });
  return el("div", { className: "detail", "data-detail": "clients" }, parts[0], " · ", parts[1]);
}

function accuracyFigure(state) {
  const accuracy = state.estimateAccuracy || {};
  if (!accuracy.scored) {
    return figure("Start estimates", "not scored yet", "no announced start has happened", "accuracy");
  }
  return figure(
    "Start estimates",
    `${percent(accuracy.shareInsideInterval)} inside`,
    `error median ${percent(accuracy.relativeErrorP50)}, p95 ${percent(accuracy.relativeErrorP95)} · ${accuracy.scored} starts`,
    "accuracy",
    clientAccuracy(accuracy),
  );
}

/** Slot time left unused while someone waited: free slots a waiter could have taken. */
function idleFigure(state) {
  const idle = state.idleSlots || {};
  const longest = `longest stretch ${duration(idle.longestStretchSeconds)}`;
  const now = idle.slots
    ? `${idle.slots} free now, for ${duration(idle.stretchSeconds)}`
    : "none now";
  return figure("Idle while waiting", duration(idle.slotSeconds), `${now} · ${longest}`, "idle");
}

/** Under the slots: the paused sessions, and, while the count sizes itself
 * (ADR 0038), its bounds and why it stands where it is. */
function slotsNote(state) {
  const paused = `${state.paused} paused`;
  const sizing = state.slotSizing;
  if (!sizing) return paused;
  const why = sizing.reason ? `: ${sizing.reason.replaceAll("-", " ")}` : "";
  return `${paused} · automatic ${sizing.minimum}–${sizing.maximum}${why}`;
}

/** The headline figures. */
export function renderFigures(container, state, now) {
  fill(
    container,
    figure("Slots in use", `${state.active} / ${state.sessions}`, slotsNote(state), "slots"),
    idleFigure(state),
    figure("Waiting", String(state.waiting), `strategy ${state.strategy}`, "waiting"),
    figure("Delivery rate", rate(state.deliveryRate), "the rate the forecast uses", "rate"),
    forecastFigure(state, now),
    accuracyFigure(state),
  );
}

/** One row per class. */
export function renderClasses(tbody, state, now) {
  const rows = CLASSES.map((cls) => {
    const c = state.classes[cls];
    const reason = reasonText(c.notDraining, now);
    const empties = c.emptiesAt ? `${clock(c.emptiesAt, now)} (${relative(c.emptiesAt, now)})` : "–";
    return el(
      "tr",
      { "data-class": cls },
      el("th", { scope: "row" }, swatch(cls), cls),
      el("td", { className: "num", "data-col": "waiting", text: String(c.waiting) }),
      el("td", { className: "num", "data-col": "active", text: String(c.active) }),
      el("td", { className: "num wide", "data-col": "paused", text: String(c.paused) }),
      el("td", { className: "num", text: c.waiting ? duration(c.oldestWaitSeconds) : "–" }),
      el("td", { className: "num wide", text: duration(c.waitP50Seconds) }),
      el("td", { className: "num wide", text: duration(c.waitP95Seconds) }),
      el("td", { className: "wide", text: c.waiting || c.active ? empties : "–" }),
      el("td", { className: reason ? "reason" : "reason none", text: reason || (c.waiting ? "draining" : "–") }),
    );
  });
  fill(tbody, rows);
}

/** The active sessions (operators only: a viewer's /state has none). */
export function renderSessions(tbody, note, state, now) {
  if (!("activeSessions" in state)) {
    fill(tbody, el("tr", {}, el("td", { colspan: "6", className: "empty", text: "—" })));
    note.textContent = "Only operators see who holds the slots.";
    return;
  }
  const sessions = state.activeSessions;
  note.textContent = sessions.length ? "" : "No session holds a slot.";
  fill(
    tbody,
    sessions.map((s) =>
      el(
        "tr",
        {},
        el("td", { text: s.principal }),
        el("td", {}, swatch(s.class), s.class),
        el("td", { text: `${clock(s.since, now)} (${relative(s.since, now)})` }),
        el("td", { className: "num", text: bytes(s.bytesDelivered) }),
        el("td", { className: "num", text: bytes(s.bytesRemaining) }),
        el("td", { className: "num", text: rate(s.rate) }),
      ),
    ),
  );
}
