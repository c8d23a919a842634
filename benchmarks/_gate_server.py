"""``arkvory-demo serve`` whose ``--bandwidth`` is the gate's one link for the whole fleet.

The demo paces its responses through one :class:`BandwidthGovernor` per process; here that
bucket is :class:`FleetLink`, which asks the link process (:mod:`benchmarks._gate_link`)
instead, so three servers share one link as they would share a site's uplink. Nothing
else changes: the arguments are ``arkvory-demo``'s, and the code is this tree's.

With ``ARKVORY_GATE_UNTOLD_RATE`` set the server is started without ``--bandwidth``, as
the README's host application is: the scheduler is told no rate and measures one, while
every file response still goes through the link (a :class:`FileServer` that paces
whatever the demo gives it), so the link is as narrow as when the rate is told.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, cast

from arkvory_sched.demo import BandwidthGovernor, _app, main
from arkvory_sched.demo._files import FileServer
from benchmarks._gate_link import UNTOLD_VARIABLE, FleetLink


class _PacedByTheLink(FileServer):
    """The demo's file server, every response paced by the link whatever it was given."""

    def __init__(self, root: Path, *, bandwidth: BandwidthGovernor | None, **rest: Any) -> None:
        link = cast(BandwidthGovernor, FleetLink(int(os.environ[UNTOLD_VARIABLE])))
        super().__init__(root, bandwidth=bandwidth or link, **rest)


setattr(_app, "BandwidthGovernor", FleetLink)  # noqa: B010 - one name, replaced on purpose
if UNTOLD_VARIABLE in os.environ:
    setattr(_app, "FileServer", _PacedByTheLink)  # noqa: B010 - likewise
sys.exit(main(sys.argv[1:]))
