"""Voice activity detection: Silero VAD's ONNX model on onnxruntime (no torch at run time).

The model consumes 512-sample windows at 16 kHz (32 ms) with 64 samples of context from the
previous window and a recurrent state; ``SileroVAD.probability`` feeds one window and returns the
speech probability. The session's input buffer
(``app/session/input_buffer.py``) cuts audio into those windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sub250.audio.rates import ASR_RATE

WINDOW = 512  # samples at 16 kHz
CONTEXT = 64


class SileroVAD:
    """One instance per audio stream (it carries state). ``load_session`` once, share the session."""

    def __init__(self, session: Any, threshold: float = 0.5) -> None:
        self.session = session
        self.threshold = threshold
        self.reset()

    @staticmethod
    def load_session(model: Path, threads: int = 1) -> object:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.enable_cpu_mem_arena = False  # fixed-size windows: nothing for an arena to keep
        return ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, CONTEXT), dtype=np.float32)
        self._sr = np.array(ASR_RATE, dtype=np.int64)

    def probability(self, window: np.ndarray) -> float:
        if window.shape[-1] != WINDOW:
            raise ValueError(f"VAD window must be {WINDOW} samples at 16 kHz, got {window.shape[-1]}")
        x = np.concatenate([self._context, window.reshape(1, WINDOW).astype(np.float32, copy=False)], axis=1)
        out, self._state = self.session.run(None, {"input": x, "state": self._state, "sr": self._sr})
        self._context = x[:, -CONTEXT:]
        return float(out[0][0])
