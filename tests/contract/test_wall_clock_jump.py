"""The shipped rules of ``arkvory_sched.testing.contract.test_wall_clock_jump`` on our stores."""

from arkvory_sched.testing.contract.test_wall_clock_jump import *  # noqa: F403
