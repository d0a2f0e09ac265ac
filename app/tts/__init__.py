"""Text to speech: an interface and the Piper implementation."""

from app.tts.base import AudioChunk, TTSEngine

__all__ = ["AudioChunk", "TTSEngine"]
