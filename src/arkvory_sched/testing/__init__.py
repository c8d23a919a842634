"""Test support shipped with the library: a controllable clock and the port's contract.

:class:`FakeClock` drives a scheduler through hours of queue time in milliseconds.

The contract suite that every ``DownloadScheduler`` of this package passes ships here
too, as trio ships its stream checks: a store written elsewhere runs it against itself
(``arkvory_sched.testing.contract``, with the pytest plugin
``arkvory_sched.testing.plugin``; the README's "Testing your own store")::

    pytest -p arkvory_sched.testing.plugin --arkvory-store mystore:make_scheduler \\
        --pyargs arkvory_sched.testing.contract

Nothing here imports pytest: ``import arkvory_sched.testing`` stays as light as the
library. The plugin and the suite need the ``testing`` extra.
"""

from __future__ import annotations

from ._clock import FakeClock
from ._suite import (
    TICKET_KEYS,
    MakeScheduler,
    StoreFactory,
    contract_schedulers,
    contract_settings,
    load_store_factory,
)

__all__ = [
    "TICKET_KEYS",
    "FakeClock",
    "MakeScheduler",
    "StoreFactory",
    "contract_schedulers",
    "contract_settings",
    "load_store_factory",
]
