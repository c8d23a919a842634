// Shared vocabulary of the page: the classes, their colours, DOM and number formatting.
// Every text goes into the page as a text node (never innerHTML), so a principal or
// an audit entry can never inject markup, and the CSP needs no exception.

export const CLASSES = ["interactive", "release", "bulk", "background"];
export const WINDOWED_CLASSES = ["release", "bulk", "background"];
export const COLORS = {
  interactive: "#2563eb",
  release: "#15803d",
  bulk: "#c2410c",
  background: "#7c3aed",
};
export const SVG_NS = "http://www.w3.org/2000/svg";

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** An SVG element with attributes. */
export function svg(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

export function swatch(cls) {
  return el("span", { className: `swatch sw-${cls}`, "aria-hidden": "true" });
}

/** Seconds as "42 s", "3 min 5 s", "2 h 10 min"; null as an en dash. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, seconds);
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 3600) {
    const m = Math.floor(s / 60);
    const rest = Math.round(s - m * 60);
    return rest ? `${m} min ${rest} s` : `${m} min`;
  }
  if (s < 86400 * 2) {
    const h = Math.floor(s / 3600);
    const m = Math.round((s - h * 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  return `${Math.round(s / 86400)} days`;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function bytes(count) {
  if (count === null || count === undefined) return "–";
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

export function rate(bytesPerSecond) {
  if (!bytesPerSecond) return "–";
  return `${bytes(Math.round(bytesPerSecond))}/s`;
}

export function percent(fraction) {
  if (fraction === null || fraction === undefined) return "–";
  return `${Math.round(fraction * 1000) / 10} %`;
}

/** An RFC 3339 instant as the reader's local clock time ("14:05", with the day if not today). */
export function clock(text, now = Date.now()) {
  if (!text) return "–";
  const at = new Date(text);
  const options = { hour: "2-digit", minute: "2-digit" };
  const sameDay = new Date(now).toDateString() === at.toDateString();
  return sameDay
    ? at.toLocaleTimeString([], options)
    : at.toLocaleString([], { weekday: "short", ...options });
}

/** "in 3 min" / "3 min ago" for an RFC 3339 instant against now (ms). */
export function relative(text, now = Date.now()) {
  if (!text) return "";
  const seconds = (Date.parse(text) - now) / 1000;
  if (Math.abs(seconds) < 1.5) return "now";
  return seconds > 0 ? `in ${duration(seconds)}` : `${duration(-seconds)} ago`;
}

/** A settings value for a sentence: arrays joined, null as the environment's value,
 * windows and service-account classes in words rather than JSON. */
export function shown(value, name = "") {
  if (value === null || value === undefined) return "environment";
  if (Array.isArray(value)) return value.join(", ");
  if (typeof value !== "object") return String(value);
  const entries = Object.entries(value);
  if (!entries.length) return "none";
  if (name === "classWindows") {
    return entries.map(([cls, entry]) => {
      const windows = (entry.windows || []).map((w) => `${w.weekdays.join(" ")} ${w.start}–${w.end} ${w.zone}`);
      return `${cls}: ${windows.join(", ")} (outside ${entry.outsideShare ?? 0})`;
    }).join("; ");
  }
  if (name === "serviceAccountClasses") return entries.map(([who, cls]) => `${who} → ${cls}`).join(", ");
  return JSON.stringify(value);
}

/** Replace the children of ``node``. */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
}
