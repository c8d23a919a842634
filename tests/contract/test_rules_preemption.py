"""The shipped rules of ``arkvory_sched.testing.contract.test_rules_preemption`` on our stores."""

from arkvory_sched.testing.contract.test_rules_preemption import *  # noqa: F403
