"""An ordered outbox of server events with purge-by-tag (barge-in drops a cancelled reply's unsent
audio at once) and write notifications (``on_sent(ns)`` once the bytes are handed to the socket)."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from app.metrics.timeline import now_ns


class Outbox:
    def __init__(self) -> None:
        self._q: deque[tuple[dict[str, Any], str | None, Callable[[int], None] | None]] = deque()
        self._wake = asyncio.Event()
        self.closed = False

    def send(self, event: dict[str, Any], *, tag: str | None = None,
             on_sent: Callable[[int], None] | None = None) -> None:
        if self.closed:
            return
        self._q.append((event, tag, on_sent))
        self._wake.set()

    def purge(self, tag: str) -> int:
        before = len(self._q)
        self._q = deque(item for item in self._q if item[1] != tag)
        return before - len(self._q)

    def __len__(self) -> int:
        return len(self._q)

    async def run(self, write: Callable[[str], Awaitable[None]]) -> None:
        """Write events until closed; serialization happens here, off the producers' paths."""
        while not self.closed:
            if not self._q:
                self._wake.clear()
                await self._wake.wait()
                continue
            event, _tag, on_sent = self._q.popleft()
            await write(json.dumps(event, separators=(",", ":")))
            if on_sent is not None:
                on_sent(now_ns())

    def close(self) -> None:
        self.closed = True
        self._q.clear()
        self._wake.set()
