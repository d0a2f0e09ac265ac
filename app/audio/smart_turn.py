"""Semantic end of turn: smart-turn v3.2 (Pipecat's BSD-2 model, ``smart-turn-v3.2-cpu.onnx``) on onnxruntime.

The model reads the *sound* of the turn so far (intonation, a word left hanging) and says how likely it is
that the caller has finished. Its input, as Pipecat's ``LocalSmartTurnAnalyzerV3`` prepares it (read from the
``pipecat-ai==1.14.0`` wheel, which only carries the file for us: none of Pipecat's code is imported):

* 16 kHz mono float32; the caller's segment from ~0.5 s before speech started up to now;
* its **last 8 s** (128 000 samples), zero-padded **at the start** when shorter;
* the waveform normalised over those 8 s (zero mean, unit variance, ``var + 1e-7``), then Whisper's log-mel:
  n_fft 400, hop 160, periodic Hann, centred (reflect-padded) STFT, 80 Slaney mel bands 0-8 kHz, the last
  frame dropped -> 800 frames, ``log10(max(mel, 1e-10))``, clamped to ``max - 8``, then ``(x + 4) / 4``;
* ONNX input ``input_features`` float32 ``(batch, 80, 800)``; output ``logits`` ``(batch, 1)`` which is,
  despite its name, already a sigmoid: the probability that the turn is **complete** (Pipecat decides
  "complete" at ``> 0.5``).

The log-mel is faster-whisper's public ``FeatureExtractor`` (the same Whisper recipe in float32; compared with
transformers' ``WhisperFeatureExtractor(chunk_length=8)``, the reference Pipecat vendors, in
``tests/unit/audio/test_smart_turn.py``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from sub250.audio.rates import ASR_RATE
from sub250.engine import ThreadedEngine
from sub250.errors import ModelError

SECONDS = 8
N_SAMPLES = SECONDS * ASR_RATE  # 128 000
N_MELS = 80
HOP = 160
N_FRAMES = N_SAMPLES // HOP  # 800
NORM_EPS = 1e-7
INPUT = "input_features"

_extractor: Any = None


def last_window(audio: np.ndarray) -> np.ndarray:
    """The last 8 s of ``audio`` (16 kHz), zero-padded at the start when shorter; float32."""
    if audio.ndim != 1:
        raise ValueError(f"smart-turn audio must be mono (1-D), got shape {audio.shape}")
    x = np.asarray(audio, dtype=np.float32)
    if x.size >= N_SAMPLES:
        return x[-N_SAMPLES:]
    return np.concatenate([np.zeros(N_SAMPLES - x.size, dtype=np.float32), x])


def features(audio: np.ndarray) -> np.ndarray:
    """Whisper log-mel ``(80, 800)`` float32 of the last 8 s of ``audio``, as the model was trained on."""
    global _extractor
    if _extractor is None:
        from faster_whisper.feature_extractor import FeatureExtractor

        _extractor = FeatureExtractor(feature_size=N_MELS, sampling_rate=ASR_RATE, hop_length=HOP,
                                      chunk_length=SECONDS, n_fft=400)
    x = last_window(audio)
    x = (x - x.mean()) / np.sqrt(x.var() + NORM_EPS)
    mel = _extractor(x, padding=0)  # 801 STFT frames, the last dropped: (80, 800)
    if mel.shape != (N_MELS, N_FRAMES):
        raise ValueError(f"smart-turn features have shape {mel.shape}, expected {(N_MELS, N_FRAMES)}")
    return mel.astype(np.float32, copy=False)


class SmartTurn(ThreadedEngine):
    """One ONNX session shared by every caller (it has no state); ``probability`` runs on its own thread:
    ``await engine.run(engine.probability, audio16k)``."""

    name = "smart-turn"

    def __init__(self, model: Path, cfg: dict[str, Any] | None = None) -> None:
        cfg = cfg or {}
        super().__init__(workers=int(cfg.get("workers", 1)))
        self.model_path = Path(model)
        self.threads = int(cfg.get("intra_op_threads", 1))
        self.session: Any = None
        self.load_seconds: float | None = None

    def load(self) -> None:
        import onnxruntime as ort

        t0 = time.perf_counter()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            session = ort.InferenceSession(str(self.model_path), sess_options=opts,
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises several types for a bad or missing file
            raise ModelError(f"smart-turn model {self.model_path} cannot be loaded: {type(exc).__name__}: {exc}",
                             "reinstall its carrier: .venv/bin/pip install --force-reinstall --no-deps "
                             "pipecat-ai==1.14.0") from None
        names = [i.name for i in session.get_inputs()]
        if names != [INPUT]:
            raise ModelError(f"smart-turn model {self.model_path} takes inputs {names}, expected [{INPUT!r}]",
                             "point the profile's [turn] source at smart-turn-v3.2-cpu.onnx")
        self.session = session
        features(np.zeros(ASR_RATE // 10, dtype=np.float32))  # build the mel filters once, off the first turn
        self.load_seconds = time.perf_counter() - t0

    def probability(self, audio: np.ndarray) -> float:
        """The probability (0-1) that the turn in ``audio`` (float32, 16 kHz, the segment so far) is complete.
        Blocking (~features + one encoder pass): from async code ``await engine.run(engine.probability, a)``."""
        if self.session is None:
            raise RuntimeError("SmartTurn.probability() before load()")
        (out,) = self.session.run(None, {INPUT: features(audio)[None]})
        p = float(np.asarray(out).reshape(-1)[0])
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            raise ModelError(f"smart-turn model returned {p!r}, not a probability",
                             "the file is not smart-turn v3.x (its output must be a sigmoid)")
        return p

    def describe(self) -> dict[str, Any]:
        import onnxruntime

        return {"engine": f"onnxruntime {onnxruntime.__version__}", "model": self.model_path.name,
                "threads": self.threads}

    def close(self) -> None:
        self.close_threads()
        self.session = None
