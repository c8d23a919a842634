// The operator page: reads the operator API every few seconds while visible and
// renders the queue, the last hour, the windows, the sessions, the settings and the
// audit trail. The server put the API's URL, the caller's role and the interval on
// <body> (data-*), since the policy allows no inline script to carry them.

import { renderAudit } from "./audit.js";
import { renderChart, renderLegend } from "./charts.js";
import { Api, Poller, problemText } from "./http.js";
import { renderClasses, renderFigures, renderSessions } from "./queue.js";
import { SettingsPanel } from "./settings.js";
import { renderTimeline } from "./timeline.js";

const AUDIT_EVERY_MS = 15000;
const AUDIT_LIMIT = 20;

const body = document.body;
const api = new Api(body.dataset.api);
const canWrite = body.dataset.role === "operator";
const pollMs = Math.min(5000, Math.max(2000, Number(body.dataset.pollMs) || 3000));
const status = document.getElementById("status");
const byId = (id) => document.getElementById(id);

let history = null;
let historyFetchedAt = 0;
let auditFetchedAt = 0;
let auditRevision = null;

const panel = new SettingsPanel(api, canWrite, () => refreshAudit(true));
renderLegend(byId("legend"));

class ApiError extends Error {}

async function refreshState() {
  const answer = await api.get("/state");
  if (!answer.ok) throw new ApiError(problemText(answer));
  const state = answer.body;
  const nowMs = Date.parse(state.at);
  renderFigures(byId("figures"), state, nowMs);
  renderClasses(byId("classes").tBodies[0], state, nowMs);
  renderSessions(byId("sessions").tBodies[0], byId("sessions-note"), state, nowMs);
  if (state.windows) {
    renderTimeline(byId("timeline"), byId("window-facts"), byId("timeline-note"), state.windows, nowMs / 1000);
  }
  body.dataset.stateAt = state.at;
  return state;
}

async function refreshHistory(state) {
  const interval = history && history.intervalSeconds ? history.intervalSeconds * 1000 : 0;
  if (history === null || Date.now() - historyFetchedAt >= Math.max(interval, pollMs)) {
    const answer = await api.get("/state/history");
    if (!answer.ok) throw new ApiError(problemText(answer));
    history = answer.body;
    historyFetchedAt = Date.now();
    byId("history-note").textContent = history.recording
      ? `One sample every ${history.intervalSeconds} s, kept for ${Math.round((history.intervalSeconds * history.capacity) / 60)} min by this server process; since its start when it is younger.`
      : "This server records no queue history.";
  }
  const now = Date.parse(state.at) / 1000;
  renderChart(byId("chart-length"), history, "waiting", now, "Queue length");
  renderChart(byId("chart-wait"), history, "oldestWaitSeconds", now, "Oldest wait");
}

async function refreshAudit(force = false) {
  const revision = panel.base ? panel.base.revision : null;
  if (!force && revision === auditRevision && Date.now() - auditFetchedAt < AUDIT_EVERY_MS) return;
  const answer = await api.get(`/settings/history?limit=${AUDIT_LIMIT}`);
  if (!answer.ok) throw new ApiError(problemText(answer));
  renderAudit(byId("audit").tBodies[0], answer.body.entries);
  auditFetchedAt = Date.now();
  auditRevision = revision;
}

async function pollOnce() {
  try {
    const [state, settings] = await Promise.all([refreshState(), panel.poll()]);
    if (settings && !settings.ok) throw new ApiError(problemText(settings));
    await Promise.all([refreshHistory(state), refreshAudit()]);
    status.classList.remove("error");
    status.textContent = `Updated ${new Date().toLocaleTimeString()} · every ${pollMs / 1000} s while this tab is visible`;
  } catch (error) {
    status.classList.add("error");
    status.textContent = error instanceof ApiError
      ? `Cannot read the queue: ${error.message} Trying again.`
      : `The API cannot be reached (${error.message}). Trying again.`;
  }
}

const poller = new Poller(pollOnce, pollMs, (paused) => {
  if (paused) {
    status.classList.remove("error");
    status.textContent = "Paused while this tab is hidden.";
  }
});
poller.start();
