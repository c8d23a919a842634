"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_estimates`` on our stores."""

from arkvory_sched.testing.contract.test_rules_estimates import *  # noqa: F403
