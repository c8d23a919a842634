"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_early_polls`` on our stores."""

from arkvory_sched.testing.contract.test_rules_early_polls import *  # noqa: F403
