"""The named SQL statements of the PostgreSQL store, as ``.sql`` data files (ADR 0018).

A package of its own, like ``arkvory_sched.migrations``, so that the wheel ships the
files and ``importlib.resources`` finds them; ``postgres._statements`` reads them.
"""
