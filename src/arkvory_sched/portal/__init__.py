"""A person's own downloads (issue #19): a page and the JSON behind it.

Mount :func:`own_downloads_app` beside the download middleware and give it the
scheduler and an ``identify`` callable that says which principal a request is. The
page shows that principal's waiting and active downloads — object, class, place, start
estimate and interval, progress — and how to lower a class or set a deadline; it never
shows anything of another principal. See ``docs/api.md`` ("A person's own downloads")
and ADR 0025.
"""

from __future__ import annotations

from ._app import (
    CONTENT_SECURITY_POLICY,
    DEFAULT_CHALLENGE,
    Identify,
    OwnDownloadsApp,
    own_downloads_app,
)
from ._document import CLASS_HEADER, own_downloads_document

__all__ = [
    "CLASS_HEADER",
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_CHALLENGE",
    "Identify",
    "OwnDownloadsApp",
    "own_downloads_app",
    "own_downloads_document",
]
