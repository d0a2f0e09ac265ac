"""The wire's audio formats: PCM16 at 24 kHz, and G.711 (μ-law ``audio/pcmu``, A-law ``audio/pcma``) at 8 kHz.

G.711 is what phone bridges and the OpenAI Agents SDK's telephony examples speak: one byte a sample. Its
codec is libsndfile's (through soundfile): the tables below are built once from it (every byte decoded,
every PCM16 value encoded), so a 20 ms frame is one numpy lookup - no per-frame library call, no hand-written
companding. Inside, audio is PCM16 at the format's rate; the rates path (app/audio/pcm.py) resamples it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

import numpy as np

from sub250.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from sub250.audio.rates import INPUT_RATE, OUTPUT_RATE

G711_RATE = 8_000
#: libsndfile's subtype for each G.711 wire type.
_SUBTYPES = {"audio/pcmu": "ULAW", "audio/pcma": "ALAW"}


@dataclass(frozen=True)
class AudioFormat:
    """One wire format: its ``type``, its rate and its bytes per sample."""

    type: str
    rate: int
    sample_bytes: int

    @property
    def g711(self) -> bool:
        return self.type in _SUBTYPES

    def seconds(self, nbytes: int) -> float:
        return nbytes / self.sample_bytes / self.rate

    def to_wire(self) -> dict[str, object]:
        return {"type": self.type, "rate": self.rate} if self.type == "audio/pcm" else {"type": self.type}

    def decode(self, data: bytes) -> bytes:
        """Wire bytes -> PCM16 mono at :attr:`rate` (PCM is passed through as it is)."""
        if not self.g711:
            return data
        return _tables(self.type)[0][np.frombuffer(data, dtype=np.uint8)].tobytes()

    def encode(self, pcm16: bytes | memoryview) -> bytes:
        """PCM16 mono at :attr:`rate` -> wire bytes."""
        if not self.g711:
            return bytes(pcm16)
        return _tables(self.type)[1][np.frombuffer(pcm16, dtype="<u2")].tobytes()


PCM_IN = AudioFormat("audio/pcm", INPUT_RATE, 2)
PCM_OUT = AudioFormat("audio/pcm", OUTPUT_RATE, 2)
PCMU = AudioFormat("audio/pcmu", G711_RATE, 1)
PCMA = AudioFormat("audio/pcma", G711_RATE, 1)
#: The G.711 formats by wire type (PCM's rate differs by direction: :data:`PCM_IN`, :data:`PCM_OUT`).
G711 = {PCMU.type: PCMU, PCMA.type: PCMA}


@cache
def _tables(wire_type: str) -> tuple[np.ndarray, np.ndarray]:
    """(decode: 256 PCM16 values by byte, encode: 65,536 bytes by PCM16 value read as uint16), libsndfile's."""
    import soundfile as sf

    subtype = _SUBTYPES[wire_type]
    decode = sf.read(io.BytesIO(bytes(range(256))), dtype="int16", format="RAW", subtype=subtype,
                     samplerate=G711_RATE, channels=1)[0].astype("<i2")
    out = io.BytesIO()
    sf.write(out, np.arange(65536, dtype=np.uint16).view(np.int16), G711_RATE, format="RAW",
             subtype=subtype)
    encode = np.frombuffer(out.getvalue(), dtype=np.uint8)
    if decode.size != 256 or encode.size != 65536:
        raise RuntimeError(f"libsndfile's {subtype} codec gave {decode.size}/{encode.size} values, not 256/65536")
    return decode, encode


class ReplyEncoder:
    """One reply's audio, PCM16 at OUTPUT_RATE, as the client's output format: resampled with state carried
    from chunk to chunk (no clicks at chunk edges), then encoded."""

    def __init__(self, fmt: AudioFormat) -> None:
        self.format = fmt
        self._resampler = StreamResampler(OUTPUT_RATE, fmt.rate)

    def encode(self, pcm16: bytes | memoryview) -> bytes:
        return self.format.encode(float32_to_pcm16(self._resampler.process(pcm16_to_float32(pcm16))))

    def flush(self) -> bytes:
        """The reply's end: what the resampler still holds (its delay: ~21 ms at 8 kHz), encoded."""
        return self.format.encode(float32_to_pcm16(self._resampler.process(np.zeros(0, np.float32), last=True)))
