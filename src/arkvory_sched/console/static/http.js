// Talking to the operator API, and the polling that pauses while nobody looks.
//
// Requests are same-origin fetches: the browser sends the host's cookie and
// Sec-Fetch-Site: same-origin, which is what the API asks of a write (ADR 0023).
// Polling stops while the tab is hidden (Page Visibility API): a forgotten tab on a
// wall screen should not read the queue every few seconds for nobody.

export class Api {
  constructor(base) {
    this.base = base;
  }

  /** GET a JSON document; resolves to {status, ok, body, headers}. */
  get(path) {
    return this.request("GET", path);
  }

  /** PUT a JSON body. */
  put(path, body) {
    return this.request("PUT", path, body);
  }

  async request(method, path, body) {
    const init = {
      method,
      credentials: "same-origin",
      cache: "no-store",
      headers: { accept: "application/json, application/problem+json" },
    };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(this.base + path, init);
    let document = null;
    const type = response.headers.get("content-type") || "";
    if (type.includes("json")) {
      try {
        document = await response.json();
      } catch {
        document = null;
      }
    }
    return { status: response.status, ok: response.ok, body: document, headers: response.headers };
  }
}

/** The message of a problem document (RFC 9457) or of a failed fetch. */
export function problemText(answer) {
  if (answer && answer.body && answer.body.detail) return answer.body.detail;
  if (answer && answer.status) return `The API answered ${answer.status}.`;
  return "The API cannot be reached.";
}

/**
 * Calls ``task`` every ``intervalMs`` while the document is visible. Hidden: no timer
 * runs at all. Visible again: one call at once, then the interval. ``onPause`` is told
 * of each change so the page can say that it paused.
 */
export class Poller {
  constructor(task, intervalMs, onPause = () => {}) {
    this.task = task;
    this.intervalMs = intervalMs;
    this.onPause = onPause;
    this.timer = null;
    this.running = false;
    document.addEventListener("visibilitychange", () => this.visibilityChanged());
  }

  start() {
    if (document.hidden) {
      this.onPause(true);
      return;
    }
    this.run();
  }

  visibilityChanged() {
    if (document.hidden) {
      this.stop();
      this.onPause(true);
    } else if (this.timer === null && !this.running) {
      this.onPause(false);
      this.run();
    }
  }

  stop() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  async run() {
    this.stop();
    this.running = true;
    try {
      await this.task();
    } catch (error) {
      console.error("poll failed", error); // the task reports to the page; poll on
    } finally {
      this.running = false;
    }
    if (!document.hidden) {
      this.timer = setTimeout(() => this.run(), this.intervalMs);
    }
  }
}
