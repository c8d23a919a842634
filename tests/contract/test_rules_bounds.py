"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_bounds`` on our stores."""

from arkvory_sched.testing.contract.test_rules_bounds import *  # noqa: F403
