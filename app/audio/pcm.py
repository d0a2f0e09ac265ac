"""Sample-format conversion and resampling (soxr), without needless copies.

Conventions: PCM16 little-endian mono on the wire; float32 in [-1, 1] inside the pipeline;
16 kHz for VAD and ASR.
"""

from __future__ import annotations

import numpy as np

from sub250.audio.rates import ASR_RATE

__all__ = ["ASR_RATE", "StreamResampler", "float32_to_pcm16", "load_audio", "pcm16_to_float32", "resample"]


def pcm16_to_float32(data: bytes | bytearray | memoryview) -> np.ndarray:
    if len(data) % 2:
        raise ValueError(f"PCM16 audio must have an even number of bytes, got {len(data)}")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def float32_to_pcm16(samples: np.ndarray) -> bytes:
    clipped = np.clip(samples, -1.0, 1.0)
    return (clipped * 32767.0).astype("<i2").tobytes()


def resample(samples: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """One-shot resampling of a whole buffer (soxr, high quality)."""
    if src_rate == dst_rate:
        return samples
    import soxr

    return soxr.resample(samples, src_rate, dst_rate, quality="HQ").astype(np.float32, copy=False)


class StreamResampler:
    """Chunk-by-chunk resampling with state carried across chunks (no clicks at chunk edges)."""

    def __init__(self, src_rate: int, dst_rate: int, dtype: str = "float32") -> None:
        self.src_rate, self.dst_rate = src_rate, dst_rate
        self._rs = None
        if src_rate != dst_rate:
            import soxr

            self._rs = soxr.ResampleStream(src_rate, dst_rate, 1, dtype=dtype, quality="HQ")

    def process(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        if self._rs is None:
            return samples
        return self._rs.resample_chunk(samples, last=last)


def load_audio(path: str, rate: int = ASR_RATE) -> np.ndarray:
    """Read a sound file (any rate, mono or stereo) as float32 mono at ``rate``."""
    import soundfile as sf

    data, src_rate = sf.read(path, dtype="float32", always_2d=True)
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    return resample(np.ascontiguousarray(mono), src_rate, rate)
