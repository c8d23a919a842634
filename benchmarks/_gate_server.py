"""``arkvory-demo serve`` whose ``--bandwidth`` is the gate's one link for the whole fleet.

The demo paces its responses through one :class:`BandwidthGovernor` per process; here that
bucket is :class:`FleetLink`, which asks the link process (:mod:`benchmarks._gate_link`)
instead, so three servers share one link as they would share a site's uplink. Nothing
else changes: the arguments are ``arkvory-demo``'s, and the code is this tree's.
"""

from __future__ import annotations

import sys

from arkvory_sched.demo import _app, main
from benchmarks._gate_link import FleetLink

setattr(_app, "BandwidthGovernor", FleetLink)  # noqa: B010 - one name, replaced on purpose
sys.exit(main(sys.argv[1:]))
