"""Server turn detection for one session: Silero VAD per 32 ms window, and the endpointer that turns its
probabilities into speech started / paused / resumed / stopped decisions, configured from the session's
``turn_detection`` (``server_vad``) and the profile's pause for the speculative end of turn."""

from __future__ import annotations

import numpy as np

from app.audio.endpointing import Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped
from app.audio.vad import SileroVAD
from app.protocol.session_config import TurnDetection

Decision = SpeechStarted | SpeechStopped | SpeechPaused | SpeechResumed | None


class TurnDetector:
    def __init__(self, vad_session: object, settings: TurnDetection | None, *, pause_ms: int) -> None:
        self._pause_ms = pause_ms
        self.settings = settings
        self._vad = SileroVAD(vad_session, threshold=self.threshold)
        self._endpointer = self._new_endpointer()

    @property
    def threshold(self) -> float:
        return self.settings.threshold if self.settings else 0.5

    @property
    def speaking(self) -> bool:
        return self._endpointer.speaking

    def _new_endpointer(self) -> Endpointer:
        silence = self.settings.silence_duration_ms if self.settings else 500
        return Endpointer(self.threshold, silence, pause_ms=self._pause_ms)

    def configure(self, settings: TurnDetection | None) -> None:
        """New ``turn_detection`` settings: they apply at once, or after the current speech if there is one."""
        self.settings = settings
        self._vad.threshold = self.threshold
        if not self._endpointer.speaking:
            self._endpointer = self._new_endpointer()

    def probabilities(self, windows: list[np.ndarray]) -> list[float]:
        """Speech probability of each window (CPU work: run it off the event loop; the VAD state is ours)."""
        return [self._vad.probability(w) for w in windows]

    def push(self, probability: float, index: int) -> Decision:
        return self._endpointer.push(probability, index)

    def reset(self) -> None:
        self._endpointer.reset()
