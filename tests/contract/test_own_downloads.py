"""The shipped rules of ``arkvory_sched.testing.contract.test_own_downloads`` on our stores."""

from arkvory_sched.testing.contract.test_own_downloads import *  # noqa: F403
