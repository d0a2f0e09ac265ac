"""Text to speech: an interface and the Piper implementation."""

from sub250.tts.base import AudioChunk, TTSEngine

__all__ = ["AudioChunk", "TTSEngine"]
