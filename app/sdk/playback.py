"""What the caller has heard of each reply: the position of a player fed with the reply's audio deltas.

Over a WebSocket the client plays the reply, so only the client knows how much of it was heard when the caller
talks over it; the server keeps in its history what the client says it played (``conversation.item.truncate``,
as in the OpenAI Realtime API). :class:`Playback` models a player that starts each delta as it arrives, right
after the one before (a gap in the deltas is a gap in the sound). An application that plays the audio itself
reports its player's real position with :meth:`Playback.played`, which then wins over the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class _ItemAudio:
    item_id: str
    received_ms: float = 0.0
    #: perf_counter_ns when the audio received so far has played out.
    ends_ns: int = 0
    #: The position the application reported (ms), if any.
    reported_ms: float | None = None
    #: Silence inside the reply so far (ms): deltas that arrived after the audio before them had played out.
    stalled_ms: float = 0.0


class Playback:
    def __init__(self) -> None:
        self._current: _ItemAudio | None = None

    def received(self, item_id: str, ms: float, now_ns: int | None = None) -> None:
        """A delta of ``ms`` of audio for ``item_id`` arrived."""
        now_ns = time.perf_counter_ns() if now_ns is None else now_ns
        cur = self._current
        if cur is None or cur.item_id != item_id:
            cur = self._current = _ItemAudio(item_id)
        if cur.ends_ns and now_ns > cur.ends_ns:
            cur.stalled_ms += (now_ns - cur.ends_ns) / 1e6
        cur.ends_ns = max(cur.ends_ns, now_ns) + int(ms * 1e6)
        cur.received_ms += ms

    def played(self, item_id: str, ms: float) -> None:
        """The application's player has played ``ms`` of ``item_id``."""
        if self._current is not None and self._current.item_id == item_id:
            self._current.reported_ms = ms

    def position(self, now_ns: int | None = None) -> tuple[str, float, float] | None:
        """(item id, ms played, ms received) of the reply audio playing or last played; None before any."""
        cur = self._current
        if cur is None:
            return None
        if cur.reported_ms is not None:
            return cur.item_id, min(cur.reported_ms, cur.received_ms), cur.received_ms
        now_ns = time.perf_counter_ns() if now_ns is None else now_ns
        left_ms = max(0.0, (cur.ends_ns - now_ns) / 1e6)
        return cur.item_id, max(0.0, cur.received_ms - left_ms), cur.received_ms

    def stalled(self, item_id: str) -> float | None:
        """Ms of silence the player met inside ``item_id``'s audio so far (a delta that came after the audio
        before it had played out: speech synthesis or the network falling behind real time); None when
        ``item_id`` is not the reply playing or last played."""
        cur = self._current
        return cur.stalled_ms if cur is not None and cur.item_id == item_id else None

    def interrupt(self, now_ns: int | None = None) -> tuple[str, int] | None:
        """The caller talks over the reply: stop playing. Returns (item id, ms played) when it was cut short
        (what to send in ``conversation.item.truncate``), None when nothing was still playing."""
        pos = self.position(now_ns)
        self._current = None
        if pos is None:
            return None
        item_id, played_ms, received_ms = pos
        if played_ms >= received_ms:
            return None
        return item_id, int(played_ms)
