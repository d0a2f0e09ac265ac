"""Audio helpers and voice activity detection (VAD)."""
