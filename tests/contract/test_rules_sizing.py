"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_sizing`` on our stores."""

from arkvory_sched.testing.contract.test_rules_sizing import *  # noqa: F403
