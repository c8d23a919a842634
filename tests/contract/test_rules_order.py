"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_order`` on our stores."""

from arkvory_sched.testing.contract.test_rules_order import *  # noqa: F403
