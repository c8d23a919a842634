"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_settings`` on our stores."""

from arkvory_sched.testing.contract.test_rules_settings import *  # noqa: F403
