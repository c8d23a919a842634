"""The public namespace is exactly ``__all__``, and everything in it is importable."""

from __future__ import annotations

import arkvory_sched
from arkvory_sched import policy


def test_all_names_are_exported_and_public() -> None:
    for name in arkvory_sched.__all__:
        assert hasattr(arkvory_sched, name), name
        assert not name.startswith("_")


def test_no_public_name_is_missing_from_all() -> None:
    public = {
        name
        for name, value in vars(arkvory_sched).items()
        if not name.startswith("_")
        and not getattr(value, "__name__", "").startswith("arkvory_sched.")
    }
    public -= {"annotations", "testing", "demo"}
    assert public == set(arkvory_sched.__all__)


def test_all_is_sorted_for_readers() -> None:
    assert list(arkvory_sched.__all__) == sorted(arkvory_sched.__all__)


def test_the_policy_exports_exactly_its_all() -> None:
    for name in policy.__all__:
        assert hasattr(policy, name), name
    public = {
        name
        for name, value in vars(policy).items()
        if not name.startswith("_") and not getattr(value, "__name__", "").startswith("arkvory_")
    }
    assert public - {"annotations"} == set(policy.__all__)


def test_the_port_and_its_optional_fast_path_are_public() -> None:
    """An implementation outside this package can offer the middleware's fast path."""
    for name in ("DownloadScheduler", "FastGrant", "FastPath"):
        assert name in arkvory_sched.__all__
    assert arkvory_sched.FastPath.__abstractmethods__ == {
        "admit_now",
        "release_per_request",
        "report_range",
        "progress_now",
    }
