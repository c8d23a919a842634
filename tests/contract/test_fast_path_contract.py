"""The shipped rules of ``arkvory_sched.testing.contract.test_fast_path_contract`` on our stores."""

from arkvory_sched.testing.contract.test_fast_path_contract import *  # noqa: F403
