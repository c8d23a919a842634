"""The shipped rules of ``arkvory_sched.testing.contract.test_idle_slots`` on our stores."""

from arkvory_sched.testing.contract.test_idle_slots import *  # noqa: F403
