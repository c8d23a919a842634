"""Marking a contract test that fails on one implementation because that one diverges.

A divergence is not hidden by weakening the test: the test stays as the rule says, runs
on every implementation, and is expected to fail (strictly) only where the
implementation is known to break the rule, with the issue that tracks the fix. Once
fixed, the strict xfail turns into a failure and the mark must go.
"""

from __future__ import annotations

import pytest

from .conftest import IMPLEMENTATIONS, POSTGRES

__all__ = ["diverges_on_postgres"]


def diverges_on_postgres(reason: str) -> pytest.MarkDecorator:
    """Run the test on every implementation; the PostgreSQL case must fail for ``reason``."""
    params = [
        pytest.param(POSTGRES, id="postgres", marks=pytest.mark.xfail(strict=True, reason=reason))
        if param.id == "postgres"
        else param
        for param in IMPLEMENTATIONS
    ]
    return pytest.mark.parametrize("implementation", params, indirect=True)
