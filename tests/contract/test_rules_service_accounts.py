"""The shipped ``arkvory_sched.testing.contract.test_rules_service_accounts`` on our stores."""

from arkvory_sched.testing.contract.test_rules_service_accounts import *  # noqa: F403
