"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_sessions`` on our stores."""

from arkvory_sched.testing.contract.test_rules_sessions import *  # noqa: F403
