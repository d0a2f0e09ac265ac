"""Endpointing (sans-I/O): VAD probabilities per 32 ms window in, speech start/stop decisions out.

Speech starts after ``min_speech_windows`` consecutive windows at or above ``threshold``; it stops
once ``silence_ms`` of windows stay below ``threshold - 0.15`` (Silero's recommended hysteresis). A stop can be
taken back at once with ``hold(ms)``: the same pause then ends the speech only after ``ms`` of silence (the caller's
words so far end open, ``app/session/turn_cue.py``), or speech resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_MS = 32.0


def ms_to_windows(ms: float) -> int:
    """The whole number of windows nearest ``ms``, at least one (a wait of so many ms, counted in windows)."""
    return max(1, round(ms / WINDOW_MS))


@dataclass(frozen=True)
class SpeechStarted:
    window: int  # index of the first speech window


@dataclass(frozen=True)
class SpeechStopped:
    window: int  # index of the last speech window


@dataclass(frozen=True)
class SpeechPaused:
    """The first silence after speech (``pause_ms`` of it): maybe the end of the turn, maybe a breath."""

    window: int  # index of the last speech window


@dataclass(frozen=True)
class SpeechResumed:
    """Speech came back after a ``SpeechPaused``, before the turn ended."""

    window: int


class Endpointer:
    def __init__(self, threshold: float = 0.5, silence_ms: int = 500, min_speech_windows: int = 2,
                 pause_ms: int = 64) -> None:
        self.threshold = threshold
        self.neg_threshold = max(0.01, threshold - 0.15)
        self.silence_windows = ms_to_windows(silence_ms)
        self.pause_windows = min(self.silence_windows, ms_to_windows(pause_ms))
        self.min_speech_windows = min_speech_windows
        self.reset()

    def reset(self) -> None:
        self.speaking = False
        self._run = 0  # consecutive speech windows while not speaking
        self._silence = 0
        self._hold_windows: int | None = None  # this pause's longer limit (``hold``), until speech resumes
        self.last_speech_window = -1

    @property
    def holding(self) -> bool:
        """The current pause was held (``hold``): it ends at its longer limit, or speech resumes it."""
        return self.speaking and self._hold_windows is not None

    def hold(self, silence_ms: int) -> bool:
        """Take back the ``SpeechStopped`` just returned: this pause ends the speech only after ``silence_ms`` of
        silence in all. False, and nothing changes, when the speech did not just stop, this pause was held
        already, or ``silence_ms`` is no longer than the silence heard."""
        windows = round(silence_ms / WINDOW_MS)
        if self.speaking or self._run != 0 or self._hold_windows is not None or self._silence < self.silence_windows \
                or windows <= self._silence:
            return False
        self.speaking = True
        self._hold_windows = windows
        return True

    def rehold(self, silence_ms: int) -> bool:
        """A held pause ends after ``silence_ms`` of silence in all instead; False, and nothing changes, when no
        pause is held or that much silence has passed already."""
        windows = round(silence_ms / WINDOW_MS)
        if not self.holding or windows <= self._silence:
            return False
        self._hold_windows = windows
        return True

    @property
    def silence_run(self) -> int:
        """Windows of silence since the last speech window (0 while not speaking or while speech goes on)."""
        return self._silence if self.speaking else 0

    def end(self) -> SpeechStopped | None:
        """End the speech now (an end-of-turn model said the turn is complete): the ``SpeechStopped`` that
        ``silence_ms`` would have given later; None when not speaking."""
        if not self.speaking:
            return None
        self.speaking = False
        self._run = 0
        self._hold_windows = None
        return SpeechStopped(self.last_speech_window)

    def push(self, prob: float, index: int) -> SpeechStarted | SpeechStopped | SpeechPaused | SpeechResumed | None:
        """Feed the probability of window ``index`` (windows must come in order)."""
        self.index = index
        if not self.speaking:
            self._run = self._run + 1 if prob >= self.threshold else 0
            if self._run >= self.min_speech_windows:
                self.speaking = True
                self._silence = 0
                self._hold_windows = None
                self.last_speech_window = self.index
                return SpeechStarted(self.index - self._run + 1)
            return None
        if prob >= self.neg_threshold:
            was_paused = self._silence >= self.pause_windows
            self._silence = 0
            self._hold_windows = None
            self.last_speech_window = self.index
            return SpeechResumed(self.index) if was_paused else None
        self._silence += 1
        if self._silence >= (self._hold_windows or self.silence_windows):
            self.speaking = False
            self._run = 0
            return SpeechStopped(self.last_speech_window)
        if self._silence == self.pause_windows:
            return SpeechPaused(self.last_speech_window)
        return None
