"""Speech recognition: an interface and the faster-whisper implementation."""

from app.asr.base import ASREngine, Transcript

__all__ = ["ASREngine", "Transcript"]
