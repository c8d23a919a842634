"""The operator page's files (HTML, CSS, JavaScript modules): package data only.

A package of its own so that ``importlib.resources`` finds the files in a wheel as in a
checkout, like the SQL of ``arkvory_sched.postgres.sql``.
"""
