"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_windows`` on our stores."""

from arkvory_sched.testing.contract.test_rules_windows import *  # noqa: F403
