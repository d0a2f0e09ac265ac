"""Server turn detection for one session: Silero VAD per 32 ms window, and the endpointer that turns its
probabilities into speech started / paused / resumed / stopped decisions, configured from the session's
``turn_detection`` and the profile's pause for the speculative end of turn.

``server_vad`` ends the turn after ``silence_duration_ms`` of silence. ``semantic_vad`` asks the end-of-turn
model (smart-turn, ``app/audio/smart_turn.py``) once a pause, after ``SemanticTiming.ask_after_ms`` of silence:
a probability of at least ``threshold`` that the turn is complete ends it then; otherwise only ``cap_ms`` of
silence does. ``eagerness`` picks the timing (:data:`EAGERNESS`; measured in docs/BENCHMARKS.md §14 by
``scripts/bench_endpointing.py``, which runs these very timings).

Either way the session may ``hold`` a pause whose words end open (``app/session/turn_cue.py``): the stop the
endpointer just decided is taken back, and that pause ends the turn only after ``hold_open_ms`` of silence. With
``server_vad`` it may also end a pause sooner (``end_now``) when the LLM reads its words as a finished turn
(``app/session/turn_words.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sub250.audio.endpointing import (
    WINDOW_MS,
    Endpointer,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    ms_to_windows,
)
from sub250.audio.vad import SileroVAD
from sub250.protocol.session_config import TurnDetection

Decision = SpeechStarted | SpeechStopped | SpeechPaused | SpeechResumed | None


@dataclass(frozen=True)
class SemanticTiming:
    ask_after_ms: int  # silence before the end-of-turn model is asked (once a pause)
    threshold: float  # its probability of "complete" that ends the turn
    cap_ms: int  # silence that ends the turn whatever it said

    @property
    def ask_after_windows(self) -> int:
        return ms_to_windows(self.ask_after_ms)


#: ``semantic_vad`` eagerness -> timing: "high" answers soonest (and cuts off most), "low" lets the caller finish.
EAGERNESS = {
    "high": SemanticTiming(160, 0.3, 1000),
    "medium": SemanticTiming(200, 0.5, 1500),
    "auto": SemanticTiming(200, 0.5, 1500),
    "low": SemanticTiming(256, 0.7, 2000),
}


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

    @property
    def semantic(self) -> SemanticTiming | None:
        """The timing of ``semantic_vad``; None for ``server_vad`` (or no server turn detection)."""
        if self.settings is None or self.settings.type != "semantic_vad":
            return None
        return EAGERNESS[self.settings.eagerness]

    @property
    def last_speech_window(self) -> int:
        return self._endpointer.last_speech_window

    def ask_end_of_turn(self) -> bool:
        """``semantic_vad``: is this the window (once a pause) to ask the end-of-turn model?"""
        timing = self.semantic
        return timing is not None and self._endpointer.silence_run == timing.ask_after_windows

    @property
    def silence_ms(self) -> int:
        """Silence heard since the last speech window (0 while not speaking, or while speech goes on)."""
        return int(self._endpointer.silence_run * WINDOW_MS)

    @property
    def holding(self) -> bool:
        """This pause was held (its words end open): it ends at the longer silence, or speech resumes it."""
        return self._endpointer.holding

    def hold(self, silence_ms: int) -> bool:
        """Take back the ``SpeechStopped`` just returned: this pause ends after ``silence_ms`` of silence in all.
        False when there was none to take back, or this pause was held already."""
        return self._endpointer.hold(silence_ms)

    def rehold(self, silence_ms: int) -> bool:
        """The held pause ends after ``silence_ms`` of silence in all instead (False: none held, or passed)."""
        return self._endpointer.rehold(silence_ms)

    def end_now(self) -> SpeechStopped | None:
        """The end-of-turn model says the turn is complete: end the speech now."""
        return self._endpointer.end()

    def _new_endpointer(self) -> Endpointer:
        timing = self.semantic
        if timing is not None:
            silence = timing.cap_ms
        else:
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
