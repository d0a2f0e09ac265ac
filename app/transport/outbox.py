"""An ordered, bounded outbox of server events, one per connection.

- Order: events are written in the order they were queued, by one writer task.
- Purge by tag: barge-in drops a cancelled reply's unsent events (its audio above all) at once.
- Write notifications: ``on_sent(ns)`` runs once an event's bytes are handed to the socket.
- Bounded: each event is serialized when it is queued (so its size is known exactly; ``json.dumps``
  escapes to ASCII, so characters are bytes), and the bytes queued but not yet written are counted. When
  a client reads slower than the server produces (or not at all), the queue would grow without end. Past
  ``max_bytes`` (default :data:`MAX_QUEUED_BYTES`, 4 MiB of JSON: about a minute of reply audio) the
  queued audio deltas of the oldest reply are dropped first (counted in :attr:`Outbox.dropped_audio`),
  then those of the next one; if it is still over (other events pile up: a client that never reads) the
  outbox closes itself and calls ``on_overflow`` (the transport closes the connection with
  :data:`OVERFLOW_CLOSE_CODE`, "client is not reading"). Other connections are not affected. Both are
  counted in Prometheus (``sub250_outbox_dropped_audio_total``, ``sub250_slow_client_closes_total``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from sub250.metrics import prometheus
from sub250.metrics.timeline import now_ns

log = logging.getLogger(__name__)

#: Default limit on serialized events queued but not yet written, per connection.
MAX_QUEUED_BYTES = 4 << 20
#: WebSocket close code (policy violation) and reason used when a client does not read its events.
OVERFLOW_CLOSE_CODE = 1008
OVERFLOW_REASON = "client is not reading"


class _Item:
    __slots__ = ("text", "tag", "on_sent", "audio")

    def __init__(self, text: str, tag: str | None, on_sent: Callable[[int], None] | None, audio: bool) -> None:
        self.text, self.tag, self.on_sent, self.audio = text, tag, on_sent, audio


class Outbox:
    def __init__(self, *, max_bytes: int = MAX_QUEUED_BYTES,
                 on_overflow: Callable[[], None] | None = None) -> None:
        self._q: deque[_Item] = deque()
        self._wake = asyncio.Event()
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        #: Audio deltas dropped because the client did not keep up.
        self.dropped_audio = 0
        self.overflowed = False
        self.closed = False
        self._on_overflow = on_overflow

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None, audio: bool = False) -> None:
        """Queue ``event``. ``audio``: a reply audio delta, which may be dropped if the client falls behind."""
        if self.closed:
            return
        item = _Item(json.dumps(event, separators=(",", ":")), tag, on_sent, audio)
        self._q.append(item)
        self.queued_bytes += len(item.text)
        self._wake.set()
        if self.queued_bytes > self.max_bytes:
            self._shed()

    def purge(self, tag: str) -> int:
        return self._drop(tag)

    def _drop(self, tag: str | None, *, audio_only: bool = False) -> int:
        """Remove the queued items of ``tag`` (``audio_only``: its audio deltas only); how many."""
        keep: deque[_Item] = deque()
        dropped = 0
        for item in self._q:
            if item.tag == tag and (item.audio or not audio_only):
                dropped += 1
                self.queued_bytes -= len(item.text)
            else:
                keep.append(item)
        self._q = keep
        return dropped

    def _shed(self) -> None:
        while self.queued_bytes > self.max_bytes:
            first = next((item for item in self._q if item.audio), None)
            if first is None:
                break
            oldest = first.tag
            n = self._drop(oldest, audio_only=True)
            self.dropped_audio += n
            prometheus.OUTBOX_DROPPED_AUDIO.inc(n)
            log.warning("outbox over %d bytes: dropped %d queued audio deltas of response %s (client is slow)",
                        self.max_bytes, n, oldest)
        if self.queued_bytes > self.max_bytes:
            log.warning("outbox over %d bytes with no audio left to drop: closing (%s)", self.max_bytes,
                        OVERFLOW_REASON)
            self.overflowed = True
            prometheus.SLOW_CLIENT_CLOSES.labels(reason="outbox_full").inc()
            self.close()
            if self._on_overflow is not None:
                self._on_overflow()

    def __len__(self) -> int:
        return len(self._q)

    async def run(self, write: Callable[[str], Awaitable[None]]) -> None:
        """Write events until closed."""
        while not self.closed:
            if not self._q:
                self._wake.clear()
                await self._wake.wait()
                continue
            item = self._q.popleft()
            self.queued_bytes -= len(item.text)
            await write(item.text)
            if item.on_sent is not None:
                item.on_sent(now_ns())

    def close(self) -> None:
        self.closed = True
        self._q.clear()
        self.queued_bytes = 0
        self._wake.set()
