// Today's and tomorrow's class windows on one timeline, with "now".
//
// The server sends every instant (the open intervals, the day starts, the three-hour
// marks in the zone's wall time), so this only places given instants on a line: the
// page never converts between time zones itself (ADR 0021, ADR 0024).

import { CLASSES, COLORS, clock, el, fill, relative, svg, swatch } from "./format.js";

const WIDTH = 1000;
const ROW = 26;
const LEFT = 96;
const RIGHT = 10;
const TOP = 34;

/** Draw the timeline of ``windows`` (GET /state's ``windows``) at ``nowSeconds``. */
export function renderTimeline(container, factsList, note, windows, nowSeconds) {
  const since = Date.parse(windows.since) / 1000;
  const until = Date.parse(windows.until) / 1000;
  const plotW = WIDTH - LEFT - RIGHT;
  const x = (t) => LEFT + ((Math.min(Math.max(t, since), until) - since) / (until - since)) * plotW;
  const height = TOP + CLASSES.length * ROW + 22;
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${height}`,
    role: "img",
    "aria-label": `Class windows from ${windows.days[0].date} to the end of ${windows.days[1].date}, ${windows.zone}`,
  });
  for (const day of windows.days) {
    root.append(svg("text", { x: x(Date.parse(day.from) / 1000) + 4, y: 12, class: "row-label" }, `${day.label} · ${day.date}`));
  }
  for (const mark of windows.marks) {
    const at = x(Date.parse(mark.at) / 1000);
    root.append(svg("line", { class: "axis", x1: at, x2: at, y1: 16, y2: height - 6 }));
    if (mark.label !== "00:00" || at > LEFT) {
      root.append(svg("text", { x: at + 2, y: 28 }, mark.label));
    }
  }
  CLASSES.forEach((cls, row) => {
    const top = TOP + row * ROW;
    const info = windows.classes[cls];
    root.append(svg("text", { x: 0, y: top + ROW / 2 + 4, class: "row-label" }, cls));
    root.append(svg("rect", { class: "closed", x: LEFT, y: top + 4, width: plotW, height: ROW - 8, rx: 3 }));
    const spans = info.windowed ? info.open : [{ from: windows.since, to: windows.until }];
    for (const span of spans) {
      const from = x(Date.parse(span.from) / 1000);
      const to = x(Date.parse(span.to) / 1000);
      root.append(svg("rect", {
        x: from, y: top + 4, width: Math.max(1, to - from), height: ROW - 8, rx: 3,
        fill: COLORS[cls], "fill-opacity": info.windowed ? 0.85 : 0.25, "data-class": cls,
      }));
    }
  });
  const now = x(nowSeconds);
  root.append(svg("line", { class: "now", x1: now, x2: now, y1: 16, y2: height - 16 }));
  root.append(svg("text", { class: "now-label", x: now, y: height - 4, "text-anchor": "middle" }, `now ${clock(new Date(nowSeconds * 1000).toISOString(), nowSeconds * 1000)}`));
  fill(container, root);
  note.textContent = `Marks are wall time in ${windows.zone}; a faint bar means the class has no windows and is always open.`;
  const nowMs = nowSeconds * 1000;
  const facts = CLASSES.filter((cls) => windows.classes[cls].windowed).map((cls) => {
    const info = windows.classes[cls];
    const state = info.openNow
      ? `open now${info.nextClosing ? `, closes ${clock(info.nextClosing, nowMs)} (${relative(info.nextClosing, nowMs)})` : ""}`
      : `closed now${info.nextOpening ? `, opens ${clock(info.nextOpening, nowMs)} (${relative(info.nextOpening, nowMs)})` : ", never opens"}`;
    const share = info.outsideShare > 0 ? `outside its windows it may hold ${Math.round(info.outsideShare * 100)} % of the slots` : "outside its windows it takes no slot";
    return el("li", { "data-class": cls }, swatch(cls), `${cls}: ${state}; ${share}.`);
  });
  fill(factsList, facts.length ? facts : [el("li", { text: "No class has windows: every class may take slots at any time." })]);
}
