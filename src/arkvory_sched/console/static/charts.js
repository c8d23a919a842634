// The last hour as two SVG line charts (queue length and oldest wait, one line per
// class), drawn from GET /state/history. No charting library: a few paths and ticks.

import { CLASSES, COLORS, duration, el, fill, svg, swatch } from "./format.js";

const WIDTH = 600;
const HEIGHT = 210;
const MARGIN = { left: 48, right: 12, top: 10, bottom: 26 };
const HOUR = 3600;
const MIN_SPAN = 60;

/** A round upper bound for the axis: 1, 2, 5 × 10^n, at least ``minimum``. */
function niceMax(value, minimum) {
  if (value <= minimum) return minimum;
  const top = Math.max(value, minimum);
  const power = 10 ** Math.floor(Math.log10(top));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= top) return step * power;
  }
  return 10 * power;
}

function yLabel(value, kind) {
  if (kind === "oldestWaitSeconds") return duration(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/**
 * Draw one chart of ``key`` per class into ``container``. ``nowSeconds`` is the right
 * edge; samples older than an hour before it fall off the left.
 */
export function renderChart(container, history, key, nowSeconds, title) {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const times = history.at || [];
  // The last hour, or the time since the first sample when the server is younger.
  const span = Math.min(HOUR, Math.max(MIN_SPAN, nowSeconds - (times.length ? times[0] : nowSeconds - HOUR)));
  const since = nowSeconds - span;
  const x = (t) => MARGIN.left + ((t - since) / span) * plotW;
  let highest = 0;
  for (const cls of CLASSES) {
    for (const value of history.classes[cls]?.[key] || []) highest = Math.max(highest, value);
  }
  // Four gridlines on round values: the top is four times a 1-2-5 step.
  const top = 4 * niceMax(highest / 4, 1);
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": `${title}: the last hour per class, highest ${yLabel(highest, key)}`,
  });
  for (let i = 0; i <= 4; i += 1) {
    const value = (top * i) / 4;
    root.append(svg("line", { class: "axis", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value) }));
    root.append(svg("text", { x: MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end" }, yLabel(value, key)));
  }
  for (let i = 0; i <= 4; i += 1) {
    const ago = span - (span * i) / 4;
    const label = i === 4 ? "now" : `−${duration(ago)}`;
    root.append(svg("text", { x: x(nowSeconds - ago), y: HEIGHT - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, label));
  }
  const gap = (history.intervalSeconds || 10) * 2.5;
  for (const cls of CLASSES) {
    const values = history.classes[cls]?.[key] || [];
    let d = "";
    let previous = null;
    times.forEach((t, i) => {
      if (t < since) return;
      const command = previous === null || t - previous > gap ? "M" : "L";
      d += `${command}${x(t).toFixed(1)},${y(values[i]).toFixed(1)} `;
      previous = t;
    });
    if (d) {
      root.append(svg("path", { d, fill: "none", stroke: COLORS[cls], "stroke-width": 2, "stroke-linejoin": "round", "data-class": cls }));
    }
  }
  if (!times.length) {
    root.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, "text-anchor": "middle" }, history.recording === false ? "this server records no history" : "no samples yet"));
  }
  fill(container, root);
}

export function renderLegend(container) {
  fill(container, CLASSES.map((cls) => el("li", {}, swatch(cls), cls)));
}
