"""A SIP call's reply frames in the worker process, taken one at a time by PJSIP's media clock (another thread
than the one that fills them): barge-in drops what is queued at once, a paused reply waits in the queue."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

CLOCK_RATE = 8000
FRAME_MS = 20
FRAME_BYTES = CLOCK_RATE * FRAME_MS // 1000 * 2  # PCM16
SILENCE = bytes(FRAME_BYTES)


class FramePlayer:
    """Reply frames, tagged by response; ``sent`` ids ride on the first frame of what carried them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frames: deque[list[Any]] = deque()  # [tag, 20 ms of PCM16, sent id | None]
        self._paused: set[str] = set()
        self._tail: dict[str, tuple[bytes, int | None]] = {}  # a reply's last bytes under a frame, and their id
        #: The server's last command applied (what an ``idle`` report is after).
        self.seq = 0

    def push(self, tag: str, pcm16: bytes, sent: int | None, seq: int = 0) -> None:
        with self._lock:
            self.seq = max(self.seq, seq)
            rest, waiting = self._tail.pop(tag, (b"", None))
            data = rest + pcm16
            sent = waiting if waiting is not None else sent
            whole = len(data) - len(data) % FRAME_BYTES
            for i in range(0, whole, FRAME_BYTES):
                self._frames.append([tag, data[i:i + FRAME_BYTES], sent])
                sent = None
            if whole < len(data) or sent is not None:
                self._tail[tag] = (data[whole:], sent)

    def finish(self, tag: str, seq: int = 0) -> None:
        """The reply's last frame, padded with silence."""
        with self._lock:
            self.seq = max(self.seq, seq)
            rest, sent = self._tail.pop(tag, (b"", None))
            if rest or sent is not None:
                self._frames.append([tag, rest + bytes(FRAME_BYTES - len(rest)), sent])

    def drop(self, tag: str | None, seq: int = 0) -> int:
        """``tag``'s frames go (every reply's with None); how many."""
        with self._lock:
            self.seq = max(self.seq, seq)
            before = len(self._frames)
            self._frames = deque(f for f in self._frames if tag is not None and f[0] != tag)
            if tag is None:
                self._tail.clear()
                self._paused.clear()
            else:
                self._tail.pop(tag, None)
                self._paused.discard(tag)
            return before - len(self._frames)

    def pause(self, tag: str, paused: bool, seq: int = 0) -> None:
        with self._lock:
            self.seq = max(self.seq, seq)
            if paused:
                self._paused.add(tag)
            else:
                self._paused.discard(tag)

    @property
    def queued(self) -> int:
        return len(self._frames)

    def idle_after(self) -> int | None:
        """The last command's ``seq`` if nothing is queued now, else None."""
        with self._lock:
            return None if self._frames else self.seq

    def next_frame(self) -> tuple[bytes, int | None, int | None]:
        """The media clock's next 20 ms: the oldest frame of a reply that is not paused, else silence; with its
        ``sent`` id, and the last command's ``seq`` when this frame emptied the queue (else None)."""
        with self._lock:
            for i, frame in enumerate(self._frames):
                if frame[0] not in self._paused:
                    del self._frames[i]
                    return frame[1], frame[2], (None if self._frames else self.seq)
        return SILENCE, None, None
