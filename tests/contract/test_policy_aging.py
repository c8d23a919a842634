"""The shipped rules of ``arkvory_sched.testing.contract.test_policy_aging`` on our stores."""

from arkvory_sched.testing.contract.test_policy_aging import *  # noqa: F403
