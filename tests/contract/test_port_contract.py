"""The shipped port contract (``arkvory_sched.testing.contract.test_port_*``) on our stores.

One module here for the three shipped ones, so the tests keep their ids.
"""

from arkvory_sched.testing.contract.test_port_close_and_waits import *  # noqa: F403
from arkvory_sched.testing.contract.test_port_sessions import *  # noqa: F403
from arkvory_sched.testing.contract.test_port_settings_and_requests import *  # noqa: F403
