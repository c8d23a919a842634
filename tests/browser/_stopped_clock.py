"""A page whose clock stands still until the test moves it, and which counts its fetches.

Pages that poll on a timer are tested on Playwright's fake clock, paused before the page
loads: the page's timers fire only when the test runs the clock forward
(``page.clock.run_for``), never because the machine was slow or fast. An init script
(it runs before the page's own scripts, and outside the page's content policy) counts
every ``fetch`` as it starts, with whether the page was hidden at that moment, and how
many fetches and body reads are still under way. So a test can tell, without timing
anything, whether a read came from a timer, whether a hidden page read at all, and when
the page has nothing in flight any more (:func:`settle`).
"""

from __future__ import annotations

import time
from typing import Final

from playwright.sync_api import Page

#: How long a page may take, in real time, to finish what it is doing (a load, a read):
#: only a hang takes this long.
SETTLE_SECONDS: Final = 30.0

_TRACK_FETCHES: Final = """
(() => {
  const fetch = window.fetch;
  const json = Response.prototype.json;
  const text = Response.prototype.text;
  const seen = { reads: [], pending: 0 };
  window.__arkvoryFetches = seen;
  const track = (promise) => {
    seen.pending += 1;
    return promise.finally(() => { seen.pending -= 1; });
  };
  window.fetch = function (input, init) {
    const url = input instanceof Request ? input.url : String(input);
    seen.reads.push({ url, hidden: document.hidden });
    return track(fetch.call(window, input, init));
  };
  Response.prototype.json = function () { return track(json.call(this)); };
  Response.prototype.text = function () { return track(text.call(this)); };
})();
"""


def stop_the_clock(page: Page) -> None:
    """Before the first navigation: pause the page's clock and count its fetches."""
    now = time.time()
    page.clock.install(time=now)
    # Far enough ahead to be in the future when the call arrives, however slowly.
    page.clock.pause_at(now + 60)
    page.add_init_script(_TRACK_FETCHES)


def reads(page: Page, suffix: str) -> list[bool]:
    """Every fetch so far of a URL ending in ``suffix``: whether the page was hidden."""
    hidden: list[bool] = page.evaluate(
        """(suffix) => window.__arkvoryFetches.reads
            .filter((read) => read.url.endsWith(suffix)).map((read) => read.hidden)""",
        suffix,
    )
    return hidden


def settle(page: Page) -> None:
    """Wait until no fetch or body read of the page is under way.

    A page's work after a read (rendering, setting its next timer) runs in the same
    turn as the read's end, so by the time this returns it is done too; and since the
    clock stands still, no timer starts anything new meanwhile.
    """
    deadline = time.monotonic() + SETTLE_SECONDS
    while page.evaluate("() => window.__arkvoryFetches.pending") != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"the page still reads after {SETTLE_SECONDS} s")
        page.wait_for_timeout(20)


def wait_for_reads(page: Page, suffix: str, more_than: int) -> list[bool]:
    """Wait until the page has started more than ``more_than`` reads of ``suffix``."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while len(seen := reads(page, suffix)) <= more_than:
        if time.monotonic() > deadline:
            raise AssertionError(f"no read of {suffix} in {SETTLE_SECONDS} s")
        page.wait_for_timeout(20)
    return seen
