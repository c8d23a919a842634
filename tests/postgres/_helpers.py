"""What several PostgreSQL test modules build the same way: one large download's request."""

from __future__ import annotations

from arkvory_sched import ByteRange, DownloadRequest, PrincipalKind

MIB = 1024 * 1024
SIZE = 40 * MIB  # above session_min_bytes: every request of it is a session's


def download(
    principal: str, download_id: str, byte_range: ByteRange | None = None
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.SERVICE,
        object_id="releases/big.iso",
        object_size=SIZE,
        byte_range=byte_range,
        download_id=download_id,
        client_address="192.0.2.1",
    )
