// The waiting page (ADR 0035): the times in the person's own time zone, and the waits
// counted down. The page works without this script: the server wrote every time in
// UTC with "in about N min", and the Refresh header asks again at the check time.
// Durations are counted from when the page arrived (performance.now), never from the
// browser's wall clock, which may be wrong; only the display of an instant uses it.
"use strict";

(function () {
  const arrived = performance.now();
  const sameDay = (a, b) => a.toDateString() === b.toDateString();
  const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const clockSeconds = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const withDay = new Intl.DateTimeFormat(undefined, {
    weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit",
  });

  function local(element, seconds) {
    const instant = new Date(element.getAttribute("datetime"));
    if (Number.isNaN(instant.getTime())) {
      return;
    }
    const format = !sameDay(instant, new Date()) ? withDay
      : seconds || element.hasAttribute("data-seconds-shown") ? clockSeconds : clock;
    element.textContent = format.format(instant);
  }

  // An interval within one minute reads "12:28:05 and 12:28:40", not "12:28 and 12:28".
  function narrow(first, second) {
    if (!first || !second) {
      return false;
    }
    const a = new Date(first.getAttribute("datetime"));
    const b = new Date(second.getAttribute("datetime"));
    return sameDay(a, b) && clock.format(a) === clock.format(b);
  }

  function inWords(seconds) {
    const whole = Math.max(0, Math.round(seconds));
    if (whole < 60) {
      return whole ? `in ${whole} s` : "now";
    }
    const minutes = Math.round(whole / 60);
    if (minutes < 90) {
      return `in about ${minutes} min`;
    }
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    if (hours < 48) {
      return rest ? `in about ${hours} h ${rest} min` : `in about ${hours} h`;
    }
    return `in about ${Math.round(hours / 24)} days`;
  }

  function elapsed() {
    return (performance.now() - arrived) / 1000;
  }

  const earliest = document.getElementById("earliest");
  const latest = document.getElementById("latest");
  const seconds = narrow(earliest, latest);
  for (const element of document.querySelectorAll("time[data-local]")) {
    local(element, seconds && (element === earliest || element === latest));
  }
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const note = document.getElementById("zone-note");
  if (note) {
    note.textContent = zone
      ? `Times are in your local time (${zone}).`
      : "Times are in your local time.";
  }

  const startIn = document.getElementById("start-in");
  const checkIn = document.getElementById("check-in");
  const check = document.getElementById("check");
  const startSeconds = Number(startIn?.dataset.seconds);
  const checkSeconds = Number(checkIn?.dataset.seconds);

  function update() {
    const now = elapsed();
    if (startIn && Number.isFinite(startSeconds)) {
      startIn.textContent = inWords(startSeconds - now);
    }
    if (!checkIn || !Number.isFinite(checkSeconds)) {
      return;
    }
    const left = checkSeconds - now;
    if (left > 0.5) {
      checkIn.textContent = inWords(left);
      window.setTimeout(update, 1000);
    } else if (check) {
      // The refresh is under way: it brings this page anew, or the file, which leaves
      // this page as it is.
      check.textContent = "Checking now. If your download has started, you can close this tab.";
    }
  }
  update();
})();
