"""The shipped rules of ``arkvory_sched.testing.contract.test_estimate_accuracy`` on our stores."""

from arkvory_sched.testing.contract.test_estimate_accuracy import *  # noqa: F403
