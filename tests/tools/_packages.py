"""Tiny but real packages for pip and npm, built with the standard library.

The recipes' tests install what the demo server serves, so the server must serve
something each installer accepts: a wheel for pip (a ZIP with ``.dist-info`` metadata
and a ``RECORD`` of hashes) and a package tarball for npm (a gzipped tar whose files
sit under ``package/``). Both carry the same incompressible payload, larger than the
test server's session threshold, so each one queues as a download session, as a
multi-gigabyte artifact would; after the install the test compares the payload the
tool wrote with the one packed here.

Nothing is downloaded and no build tool runs: fixed timestamps make the bytes depend
on this code alone.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import random
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["PAYLOAD_BYTES", "Package", "build_npm_tarball", "build_wheel"]

#: Larger than the tests' session threshold (16 KiB), and random, so compression
#: cannot bring the package below it.
PAYLOAD_BYTES: Final = 64 * 1024
_DIST: Final = "arkvory_recipe_probe"
_VERSION: Final = "1.0.0"
_ZIP_TIME: Final = (2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Package:
    """A package file written into the served directory."""

    path: Path  # where the server serves it from
    name: str  # what the installer calls it
    payload: bytes  # the bytes of ``payload.bin`` inside it

    @property
    def payload_sha256(self) -> str:
        return hashlib.sha256(self.payload).hexdigest()


def _payload(seed: str) -> bytes:
    return random.Random(seed).randbytes(PAYLOAD_BYTES)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(directory: Path, seed: str = "wheel") -> Package:
    """A pure-Python wheel of one module package holding ``payload.bin``."""
    payload = _payload(seed)
    info = f"{_DIST}-{_VERSION}.dist-info"
    files = {
        f"{_DIST}/__init__.py": b'"""Installed by the arkvory-sched recipes\' tests."""\n',
        f"{_DIST}/payload.bin": payload,
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: arkvory-recipe-probe\nVersion: {_VERSION}\n"
        ).encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: arkvory-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    path = directory / f"{_DIST}-{_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data)
    return Package(path, "arkvory-recipe-probe", payload)


def build_npm_tarball(directory: Path, seed: str = "npm") -> Package:
    """An npm package tarball (what ``npm pack`` writes) holding ``payload.bin``."""
    payload = _payload(seed)
    manifest = {"name": "arkvory-recipe-probe", "version": _VERSION, "license": "Apache-2.0"}
    files = {
        "package/package.json": json.dumps(manifest, indent=2).encode() + b"\n",
        "package/payload.bin": payload,
    }
    buffer = io.BytesIO()
    # The gzip header's time is fixed too, so the bytes do not depend on the day.
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w") as archive,
    ):
        for name, data in files.items():
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            entry.mode = 0o644
            entry.mtime = 0
            archive.addfile(entry, io.BytesIO(data))
    path = directory / f"arkvory-recipe-probe-{_VERSION}.tgz"
    path.write_bytes(buffer.getvalue())
    return Package(path, "arkvory-recipe-probe", payload)
