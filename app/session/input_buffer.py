"""The input audio buffer (sans-I/O, no asyncio): caller audio in, 32 ms windows at 16 kHz out.

PCM16 arrives at whatever rate its transport carries (24 kHz from ``input_audio_buffer.append``, 16 kHz from a
WebRTC track decoded at the edge); :meth:`InputBuffer.cut` converts it once to float32 at
:data:`~app.audio.rates.ASR_RATE` and cuts it into VAD windows. Windows are numbered from the start of the
session (absolute indices), so a turn is a range of indices whatever has been dropped before it.
"""

from __future__ import annotations

import numpy as np

from sub250.audio.endpointing import WINDOW_MS
from sub250.audio.pcm import StreamResampler, pcm16_to_float32
from sub250.audio.rates import ASR_RATE
from sub250.audio.vad import WINDOW

#: Most audio the buffer holds for a client-committed turn (no server VAD) before the client must commit.
MAX_BUFFER_MS = 120_000


class InputBuffer:
    def __init__(self) -> None:
        self._resamplers: dict[int, StreamResampler] = {}
        self._pending = np.zeros(0, dtype=np.float32)  # less than a window, waiting for more
        self._windows: list[np.ndarray] = []
        self._arrival: list[int] = []  # arrival (ns) of the frame that completed each window
        self._first = 0  # absolute index of self._windows[0]

    # --- in ------------------------------------------------------------------------------------------

    def cut(self, pcm16: bytes | memoryview, rate: int) -> list[np.ndarray]:
        """PCM16 mono at ``rate`` -> the complete 16 kHz windows it finishes (CPU work: run it off the loop).
        Only this buffer's resampler and pending samples change; :meth:`append` stores the windows."""
        samples = pcm16_to_float32(pcm16)
        if rate != ASR_RATE:
            rs = self._resamplers.get(rate)
            if rs is None:
                rs = self._resamplers[rate] = StreamResampler(rate, ASR_RATE)
            samples = rs.process(samples)
        buf = np.concatenate([self._pending, samples]) if self._pending.size else samples
        n = buf.size // WINDOW
        self._pending = buf[n * WINDOW :].copy()
        return [buf[i * WINDOW : (i + 1) * WINDOW] for i in range(n)]

    def append(self, windows: list[np.ndarray], arrival_ns: int) -> int:
        """Store ``windows`` (from :meth:`cut`); return the absolute index of the first one."""
        first = self.end
        self._windows.extend(windows)
        self._arrival.extend([arrival_ns] * len(windows))
        return first

    def flush_pending(self, arrival_ns: int) -> None:
        """A client commit: what the resamplers still hold and the samples short of a window are stored too
        (the last window padded with silence)."""
        tails = [rs.process(np.zeros(0, dtype=np.float32), last=True) for rs in self._resamplers.values()]
        self._resamplers.clear()  # a flushed stream resampler is done; the next audio starts a new one
        buf = np.concatenate([self._pending, *tails])
        self._pending = np.zeros(0, dtype=np.float32)
        if buf.size:
            pad = -buf.size % WINDOW
            buf = np.pad(buf, (0, pad))
            self.append([buf[i : i + WINDOW] for i in range(0, buf.size, WINDOW)], arrival_ns)

    # --- out -----------------------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Absolute index one past the newest window."""
        return self._first + len(self._windows)

    @property
    def start(self) -> int:
        """Absolute index of the oldest window still held."""
        return self._first

    def __len__(self) -> int:
        return len(self._windows)

    @property
    def empty(self) -> bool:
        return not self._windows and not self._pending.size

    def arrival(self, index: int) -> int:
        return self._arrival[index - self._first]

    def last_arrival(self) -> int | None:
        return self._arrival[-1] if self._arrival else None

    def audio(self, first: int, last: int | None = None) -> np.ndarray:
        """Windows ``first`` .. ``last`` (inclusive; default: the newest) as one array."""
        lo = max(0, first - self._first)
        hi = len(self._windows) if last is None else max(0, last - self._first + 1)
        parts = self._windows[lo:hi]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    def take(self, first: int) -> np.ndarray:
        """The audio from window ``first`` on; the buffer is emptied."""
        audio = self.audio(first)
        self.clear()
        return audio

    def clear(self, *, pending: bool = False) -> None:
        """Drop every stored window (and, with ``pending``, the samples short of a window)."""
        self._first += len(self._windows)
        self._windows.clear()
        self._arrival.clear()
        if pending:
            self._pending = np.zeros(0, dtype=np.float32)

    def keep_last(self, count: int) -> None:
        """Drop all but the newest ``count`` windows (idle: only what prefix padding may need)."""
        drop = len(self._windows) - count
        if drop > 0:
            del self._windows[:drop], self._arrival[:drop]
            self._first += drop

    @staticmethod
    def ms(index: int) -> int:
        """Where absolute window ``index`` starts, in ms of audio since the session began."""
        return int(index * WINDOW_MS)

    def held_ms(self) -> float:
        return len(self._windows) * WINDOW_MS
