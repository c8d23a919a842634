"""The public namespace is exactly ``__all__``: every name exported exists, every public
name is listed, and nothing private leaks (the ``arkvoryctl`` CLI builds on this)."""

from __future__ import annotations

import arkvory_client


def test_all_names_exist() -> None:
    missing = [name for name in arkvory_client.__all__ if not hasattr(arkvory_client, name)]
    assert missing == []


def test_all_is_sorted_and_unique() -> None:
    names = arkvory_client.__all__
    assert len(set(names)) == len(names)
    constants = [name for name in names if name.isupper()]
    rest = [name for name in names if not name.isupper()]
    assert names == sorted(constants) + sorted(rest, key=lambda n: (n[0].islower(), n))


def test_every_public_member_is_listed() -> None:
    public = {
        name
        for name, value in vars(arkvory_client).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("arkvory_client")
    }
    assert public <= set(arkvory_client.__all__)


def test_exported_members_claim_the_public_module() -> None:
    """Classes and functions are defined in private modules; none is a stray import."""
    for name in arkvory_client.__all__:
        module = getattr(getattr(arkvory_client, name), "__module__", None)
        if module is not None and module.startswith("arkvory"):
            assert module.startswith("arkvory_client._"), name
