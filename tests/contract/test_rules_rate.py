"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_rate`` on our stores."""

from arkvory_sched.testing.contract.test_rules_rate import *  # noqa: F403
