"""The caller's long silence (``turn_detection.idle_timeout_ms``): when to nudge them.

:func:`nudge_after` decides whether a finished response arms the timer and for how long; :class:`IdleTimer`
holds the one armed timer of a session. One nudge in a row at most: after a nudge the timer waits for the
caller to speak again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def nudge_after(td: Any, reply: Any, *, transcription_only: bool) -> float | None:
    """Seconds from now to the nudge after ``reply`` (finished): ``idle_timeout_ms`` after its audio will have
    played; None: no nudge (no timeout set, a transcription session, a reply that did not complete, or a
    nudge itself)."""
    if td is None or td.idle_timeout_ms is None or transcription_only or reply.idle or not reply.completed:
        return None
    return (td.idle_timeout_ms + reply.delivery.playback_left_ms()) / 1000


class IdleTimer:
    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None
        #: Where in the caller's audio the silence began (the nudge's ``audio_start_ms``).
        self.from_ms = 0

    def arm(self, delay_s: float, from_ms: int, fire: Callable[[], None]) -> None:
        self.disarm()
        self.from_ms = from_ms
        self._handle = asyncio.get_running_loop().call_later(delay_s, self._fire, fire)

    def _fire(self, fire: Callable[[], None]) -> None:
        self._handle = None
        fire()

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
