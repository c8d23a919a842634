// A person's own downloads: polls the JSON beside this page and shows it.
//
// Every value from the server is written with textContent, never as markup, and the
// page's Content-Security-Policy allows no other script. Updates pause while the tab
// is hidden (nobody reads it, and the server need not answer) and resume at once when
// it is shown again.
"use strict";

(() => {
  const PERIOD_MS = 3000;
  const api = document.body.dataset.api;
  const list = document.getElementById("downloads");
  const template = document.getElementById("download-template");
  const status = document.getElementById("status");
  const empty = document.getElementById("empty");
  const more = document.getElementById("more");
  const principal = document.getElementById("principal");
  const auto = document.getElementById("auto");
  const refresh = document.getElementById("refresh");
  const weights = document.getElementById("weights");

  const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const clockSeconds = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const dayAndClock = new Intl.DateTimeFormat(undefined, {
    weekday: "short", hour: "2-digit", minute: "2-digit",
  });
  const STATES = { waiting: "Waiting", active: "Downloading", paused: "Paused" };

  let timer = null;
  let loading = false;
  let last = null; // { document, receivedAt }

  // Local wall time; with seconds where minutes alone would hide the difference (a
  // short interval whose both ends fall in one minute).
  function localTime(text, seconds = false) {
    const moment = new Date(text);
    const sameDay = moment.toDateString() === new Date().toDateString();
    if (!sameDay) return dayAndClock.format(moment);
    return (seconds ? clockSeconds : clock).format(moment);
  }

  function interval(earliest, latest) {
    const close = Math.abs(new Date(latest) - new Date(earliest)) < 10 * 60 * 1000;
    return `${localTime(earliest, close)} – ${localTime(latest, close)}`;
  }

  function inWords(seconds) {
    if (seconds < 60) return "in under a minute";
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return `in ${minutes} min`;
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    return rest ? `in ${hours} h ${rest} min` : `in ${hours} h`;
  }

  function size(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${value >= 10 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
  }

  function ordinalPlace(position) {
    return position === 1 ? "next in line" : `${position - 1} ahead of you`;
  }

  // The class to suggest: bulk (mass updates) when it is below the download's class,
  // else the next one below; null when there is none.
  function lowerClass(classes) {
    if (classes.includes("bulk")) return "bulk";
    return classes.length ? classes[0] : null;
  }

  function code(text) {
    const node = document.createElement("code");
    node.textContent = text;
    return node;
  }

  // The weights in force, as "interactive 8 : release 4 : bulk 2 : background 1".
  function showWeights(classWeights) {
    if (!classWeights) {
      weights.textContent = "";
      return;
    }
    const parts = Object.entries(classWeights).map(([name, weight]) => `${name} ${weight}`);
    weights.textContent = ` (here ${parts.join(" : ")})`;
  }

  function field(node, name) {
    return node.querySelector(`[data-field="${name}"]`);
  }

  function card(download, index, elapsed) {
    const node = template.content.firstElementChild.cloneNode(true);
    node.dataset.state = download.state;
    node.dataset.object = download.objectId;
    field(node, "object").textContent = download.objectId || "(unknown object)";
    field(node, "state").textContent = STATES[download.state] || download.state;
    const cls = download.queueClass !== download.class
      ? `${download.class}, moved up to ${download.queueClass}` : download.class;
    field(node, "class").textContent = cls;
    field(node, "class").title = "class";

    const waiting = download.state === "waiting" && download.position !== null;
    const position = field(node, "position");
    if (waiting) {
      position.textContent = `#${download.position}`;
      position.dataset.position = String(download.position);
      const note = document.createElement("span");
      note.className = "sub";
      note.textContent = ` ${ordinalPlace(download.position)}`;
      position.append(note);
    } else {
      node.querySelector(".fact-position").hidden = true;
    }
    if (download.startsAt) {
      // Told on a guess of the link's rate (nothing configured, nothing measured yet),
      // the point is no promise: say so in words, as the waiting page does (ADR 0042).
      field(node, "start-label").textContent =
        download.startsGuessed ? "First guess of the start" : "Expected start";
      field(node, "starts").textContent = localTime(download.startsAt);
      const left = Math.max(0, download.startsInSeconds - elapsed);
      field(node, "starts-in").textContent = `(${inWords(left)})`;
      field(node, "interval").textContent =
        interval(download.startsEarliest, download.startsLatest);
    } else {
      node.querySelector(".fact-start").hidden = true;
      node.querySelector(".fact-interval").hidden = true;
    }
    const done = download.objectSize - download.bytesRemaining;
    const bar = field(node, "progress-bar");
    bar.value = download.progress;
    bar.setAttribute("aria-label", `Progress of ${download.objectId}`);
    bar.textContent = `${Math.round(download.progress * 100)}%`;
    let text = `${size(done)} of ${size(download.objectSize)}`;
    if (download.state === "active" && download.rate) text += ` · ${size(download.rate)}/s`;
    field(node, "progress").textContent = text;
    if (download.state !== "active" && done === 0) {
      node.querySelector(".fact-progress").hidden = true;
    }
    const since = { waiting: "Waiting since", active: "Downloading since", paused: "Paused since" };
    field(node, "since").textContent =
      `${since[download.state] || "Since"} ${localTime(download.since)}`;
    if (download.downloadId) {
      field(node, "download-id").textContent = download.downloadId;
    } else {
      node.querySelector(".id").hidden = true;
    }
    // Only a class below the download's own, never one it already is in or above;
    // none for a download in the lowest class.
    const lower = field(node, "lower");
    const lowered = lowerClass(download.lowerClasses || []);
    if (waiting && lowered) {
      lower.dataset.class = lowered;
      lower.append("Not urgent? Send ", code(`Arkvory-Download-Class: ${lowered}`),
        " with its requests, or download it with ",
        code(`arkvoryctl download --class ${lowered} URL`), ".");
    } else {
      lower.hidden = true;
    }
    const title = field(node, "object");
    title.id = `download-${index}`;
    node.querySelector("article").setAttribute("aria-labelledby", title.id);
    return node;
  }

  function render() {
    if (!last) return;
    const { document: mine, receivedAt } = last;
    const elapsed = (Date.now() - receivedAt) / 1000;
    principal.textContent = mine.principal;
    showWeights(mine.advice && mine.advice.classWeights);
    list.replaceChildren(...mine.downloads.map((download, index) => card(download, index, elapsed)));
    empty.hidden = mine.downloads.length !== 0;
    more.hidden = !mine.truncated;
    more.textContent = mine.truncated
      ? `Showing your ${mine.shown} oldest downloads of ${mine.total}.` : "";
  }

  function say(text, trouble = false) {
    status.textContent = text;
    status.classList.toggle("trouble", trouble);
  }

  async function load() {
    if (loading) return;
    loading = true;
    try {
      const response = await fetch(api, {
        headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin",
      });
      if (response.status === 401) {
        say("You are signed out. Sign in again to see your downloads.", true);
        list.replaceChildren();
        return;
      }
      if (!response.ok) {
        say(`The server could not list your downloads (status ${response.status}); trying again.`, true);
        return;
      }
      last = { document: await response.json(), receivedAt: Date.now() };
      render();
      const count = last.document.total;
      const what = count === 1 ? "1 download" : `${count} downloads`;
      say(`${what} · updated ${clock.format(new Date())}`);
    } catch (error) {
      say("The server cannot be reached; trying again.", true);
    } finally {
      loading = false;
      schedule();
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (auto.checked && !document.hidden) timer = setTimeout(load, PERIOD_MS);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else if (auto.checked) {
      load();
    }
  });
  auto.addEventListener("change", () => (auto.checked ? load() : schedule()));
  refresh.addEventListener("click", () => load());
  load();
})();
