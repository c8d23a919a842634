"""The shipped rules of ``arkvory_sched.testing.contract.test_store_bounds`` on our stores."""

from arkvory_sched.testing.contract.test_store_bounds import *  # noqa: F403
