"""Speech recognition: an interface and the faster-whisper implementation."""

from sub250.asr.base import ASREngine, Transcript

__all__ = ["ASREngine", "Transcript"]
