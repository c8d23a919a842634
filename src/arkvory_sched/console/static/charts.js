// The last hour as two SVG line charts (queue length and oldest wait, one line per
// class), drawn from GET /state/history. No charting library: a few paths and ticks.
//
// The y axis labels must stay whole ("3 min 20 s" once lost its first letters): the
// wait axis steps in round durations, so its labels are short, the left margin is
// made wide enough for the longest label, and once the chart is on the page its
// texts are measured and the view widened if a font is wider than the estimate.

import { CLASSES, COLORS, duration, el, fill, svg, swatch } from "./format.js";

const WIDTH = 600;
const HEIGHT = 210;
const MARGIN = { left: 48, right: 12, top: 10, bottom: 26 };
const LABEL_GAP = 6; // between a y label's end and the plot
const CHAR_WIDTH = 6.6; // a generous average advance of the 11 px labels (console.css)
const HOUR = 3600;
const MIN_SPAN = 60;
/** Steps of the wait axis: round durations a person reads at a glance. */
const DURATION_STEPS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

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

/** The wait axis's step: the first round duration at least ``value``, whole days beyond. */
function durationStep(value) {
  for (const step of DURATION_STEPS) {
    if (step >= value) return step;
  }
  return 86400 * niceMax(value / 86400, 1);
}

/** A round duration as a whole label: "45 s", "1 min 30 s", "2 h", "3 days". */
function axisDuration(seconds) {
  if (seconds === 0) return "0";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) {
    const m = Math.floor(seconds / 60);
    const s = seconds % 60;
    return s ? `${m} min ${s} s` : `${m} min`;
  }
  if (seconds < 172800) {
    const h = Math.floor(seconds / 3600);
    const m = Math.round((seconds % 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  return `${Math.round(seconds / 86400)} days`;
}

function yLabel(value, kind) {
  if (kind === "oldestWaitSeconds") return axisDuration(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/**
 * Widen the view where a label, measured as drawn, sticks out of it (a font wider than
 * the estimate): every text stays whole whatever font the browser chose. A chart not
 * laid out (a hidden tab) measures nothing and is left as drawn.
 */
function keepTextsWhole(root) {
  const box = root.getBBox();
  if (!box.width || !box.height) return;
  const x0 = Math.min(0, Math.floor(box.x) - 1);
  const y0 = Math.min(0, Math.floor(box.y) - 1);
  const x1 = Math.max(WIDTH, Math.ceil(box.x + box.width) + 1);
  const y1 = Math.max(HEIGHT, Math.ceil(box.y + box.height) + 1);
  if (box.x < 0 || box.y < 0 || box.x + box.width > WIDTH || box.y + box.height > HEIGHT) {
    root.setAttribute("viewBox", `${x0} ${y0} ${x1 - x0} ${y1 - y0}`);
  }
}

/**
 * Draw one chart of ``key`` per class into ``container``. ``nowSeconds`` is the right
 * edge; samples older than an hour before it fall off the left.
 */
export function renderChart(container, history, key, nowSeconds, title) {
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const times = history.at || [];
  // The last hour, or the time since the first sample when the server is younger.
  const span = Math.min(HOUR, Math.max(MIN_SPAN, nowSeconds - (times.length ? times[0] : nowSeconds - HOUR)));
  const since = nowSeconds - span;
  let highest = 0;
  for (const cls of CLASSES) {
    for (const value of history.classes[cls]?.[key] || []) highest = Math.max(highest, value);
  }
  // Four gridlines on round values: the top is four times a 1-2-5 step (a round
  // duration on the wait axis).
  const step = key === "oldestWaitSeconds" ? durationStep(highest / 4) : niceMax(highest / 4, 1);
  const top = 4 * step;
  const ticks = [0, 1, 2, 3, 4].map((i) => ({ value: step * i, label: yLabel(step * i, key) }));
  const longest = Math.max(...ticks.map((tick) => tick.label.length));
  const left = Math.max(MARGIN.left, Math.ceil(longest * CHAR_WIDTH) + LABEL_GAP + 2);
  const plotW = WIDTH - left - MARGIN.right;
  const x = (t) => left + ((t - since) / span) * plotW;
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": `${title}: the last hour per class, highest ${
      key === "oldestWaitSeconds" ? duration(highest) : yLabel(highest, key)}`,
  });
  for (const { value, label } of ticks) {
    root.append(svg("line", { class: "axis", x1: left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value) }));
    root.append(svg("text", { class: "y-label", x: left - LABEL_GAP, y: y(value) + 4, "text-anchor": "end" }, label));
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
  keepTextsWhole(root);
}

export function renderLegend(container) {
  fill(container, CLASSES.map((cls) => el("li", {}, swatch(cls), cls)));
}
