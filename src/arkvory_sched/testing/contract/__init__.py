"""The ``DownloadScheduler`` contract suite, shipped so that any store can run it.

Every rule of the port that a store must keep — sessions, bounds, order, preemption,
estimates, windows, tickets, the optional fast path — one pytest module each, using
only the async port and a :class:`~arkvory_sched.testing.FakeClock`. Both stores of
this package pass it (``tests/contract`` runs these modules on them); a store written
elsewhere runs it against itself::

    pytest -p arkvory_sched.testing.plugin --arkvory-store mystore:make_scheduler \\
        --pyargs arkvory_sched.testing.contract

The factory (``arkvory_sched.testing.StoreFactory``) is called with the test's
settings, clock and ticket keys; see ``arkvory_sched.testing.plugin``.
"""
