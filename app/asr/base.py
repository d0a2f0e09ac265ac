"""The ASR interface."""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Transcript:
    text: str
    #: Seconds of audio transcribed, and seconds of CPU wall time it took.
    audio_seconds: float
    compute_seconds: float
    language: str = "en"


class ASREngine(abc.ABC):
    name = "asr"

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model (blocking; call from a thread)."""

    @abc.abstractmethod
    def transcribe(self, audio: np.ndarray, *, window: str | None = None) -> Transcript:
        """Transcribe float32 16 kHz mono audio (blocking, CPU-heavy: call via ``asyncio.to_thread``).
        ``window`` may ask for a faster, less accurate pass (engines that have none ignore it)."""
