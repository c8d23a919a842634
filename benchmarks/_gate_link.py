"""The gate's link: one token bucket that every server of the fleet sends through.

A mass update is limited by the site's uplink, not by any one server. Debian 12's HAProxy
(2.6) has no bandwidth filter (``bwlim-out`` came in 2.7), and pacing each of three
servers at a third of the rate is three links: a server serving fewer downloads leaves
its third unused. A TCP relay in front of the fleet was tried first: the bytes it queued
in the servers' socket buffers (loopback's 64 KiB segments let the kernel grow them to
about a megabyte) counted as delivered at the servers, which then believed in a faster
link than there was. So the link is the demo's own pacing (``--bandwidth``: one
:class:`BandwidthGovernor`, FIFO between the chunks of every response, so concurrent
responses share it evenly), made one for the fleet: this process holds the bucket, and
each server asks it for every chunk's bytes over a Unix socket before sending
(:class:`FleetLink`, run by :mod:`benchmarks._gate_server`). The bytes granted are
recorded every 100 ms and written as JSON on SIGTERM: the link's utilisation.

Run: ``python -m benchmarks._gate_link SOCKET_PATH BYTES_PER_SECOND OUT.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

from arkvory_sched.demo import BandwidthGovernor

__all__ = ["LINK_VARIABLE", "UNTOLD_VARIABLE", "FleetLink"]

LINK_VARIABLE = "ARKVORY_GATE_LINK"
UNTOLD_VARIABLE = "ARKVORY_GATE_UNTOLD_RATE"  # set: paced by the link, the scheduler not told


class FleetLink:
    """In a server: the demo's governor, asking the link process instead of a local bucket.

    Requests are multiplexed on one connection (``id bytes`` out, ``id`` back when
    granted), so every response of every server waits in the one FIFO. ``bytes_per_second``
    is the link process's business; it is taken to match the governor's signature.
    """

    def __init__(self, bytes_per_second: int) -> None:
        self.bytes_per_second = bytes_per_second
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._next = 0
        self._reading: asyncio.Task[None] | None = None

    async def acquire(self, n: int) -> None:
        if self._writer is None:
            reader, writer = await asyncio.open_unix_connection(os.environ[LINK_VARIABLE])
            if self._writer is None:
                self._writer, self._reading = writer, asyncio.ensure_future(self._read(reader))
            else:
                writer.close()
        self._next += 1
        granted = self._pending[self._next] = asyncio.get_running_loop().create_future()
        self._writer.write(f"{self._next} {n}\n".encode())
        await granted

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            granted = self._pending.pop(int(line))
            if not granted.done():  # a response cancelled while waiting
                granted.set_result(None)


class _Bucket:
    def __init__(self, rate: int) -> None:
        self.governor = BandwidthGovernor(rate)
        self.granted = 0
        self.samples: list[tuple[float, int]] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def grant(ident: bytes, n: int) -> None:
            await self.governor.acquire(n)  # its lock is FIFO: requests in order of arrival
            self.granted += n
            writer.write(ident + b"\n")

        while line := await reader.readline():
            ident, n = line.split()
            task = asyncio.ensure_future(grant(ident, int(n)))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def sample(self) -> None:
        while True:
            self.samples.append((time.time(), self.granted))
            await asyncio.sleep(0.1)


async def _main(path: str, rate: int, out: str) -> None:
    bucket = _Bucket(rate)
    server = await asyncio.start_unix_server(bucket.serve, path)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    sampler = asyncio.ensure_future(bucket.sample())
    await stop.wait()
    sampler.cancel()
    server.close()
    with open(out, "w", encoding="utf-8") as file:
        json.dump(bucket.samples, file)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
