"""The shipped rules of ``arkvory_sched.testing.contract.test_queue_state`` on our stores."""

from arkvory_sched.testing.contract.test_queue_state import *  # noqa: F403
