"""G.711 on the wire: libsndfile's codec as lookup tables, checked against the standard library's independent
G.711 (``audioop``, deprecated but present up to Python 3.12) and against the ITU values everyone agrees on."""

import io
import warnings

import numpy as np
import pytest
import soundfile as sf

from sub250.audio.formats import PCM_IN, PCM_OUT, PCMA, PCMU, ReplyEncoder
from sub250.audio.rates import OUTPUT_RATE

ALL_PCM16 = np.arange(-32768, 32768, dtype="<i2")


def test_silence_and_the_extremes_have_their_itu_codes():
    assert PCMU.encode(np.zeros(3, "<i2").tobytes()) == b"\xff\xff\xff"  # mu-law zero: 0xFF
    assert PCMA.encode(np.zeros(3, "<i2").tobytes()) == b"\xd5\xd5\xd5"  # A-law zero: 0xD5 (even bits inverted)
    assert np.frombuffer(PCMU.decode(b"\x00\x80"), "<i2").tolist() == [-32124, 32124]
    assert np.frombuffer(PCMA.decode(b"\x55\xd5"), "<i2").tolist() == [-8, 8]


@pytest.mark.parametrize("fmt", [PCMU, PCMA], ids=lambda f: f.type)
def test_the_codec_agrees_with_an_independent_one(fmt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    lin2, to_lin = (audioop.lin2ulaw, audioop.ulaw2lin) if fmt is PCMU else (audioop.lin2alaw, audioop.alaw2lin)
    every_byte = bytes(range(256))
    assert fmt.decode(every_byte) == to_lin(every_byte, 2)  # decoding is a fixed table: identical
    ours = np.frombuffer(fmt.encode(ALL_PCM16.tobytes()), np.uint8)
    theirs = np.frombuffer(lin2(ALL_PCM16.tobytes(), 2), np.uint8)
    # encoders differ only in how they round a value on a step's edge: a neighbouring code, rarely
    assert (ours != theirs).mean() < 0.01
    back = np.frombuffer(fmt.decode(fmt.encode(ALL_PCM16.tobytes())), "<i2").astype(np.int32)
    err = np.abs(back - ALL_PCM16)
    assert err.max() <= 644 and err[np.abs(ALL_PCM16.astype(np.int32)) < 256].max() <= 8  # the steps grow with the level


def test_a_file_soundfile_writes_as_mu_law_decodes_to_its_samples():
    tone = (np.sin(np.arange(800) * 2 * np.pi * 440 / 8000) * 12000).astype("<i2")
    out = io.BytesIO()
    sf.write(out, tone, 8000, format="RAW", subtype="ULAW")
    assert PCMU.encode(tone.tobytes()) == out.getvalue()
    decoded = np.frombuffer(PCMU.decode(out.getvalue()), "<i2").astype(np.int32)
    assert np.abs(decoded - tone).max() < 400


def test_pcm_passes_through_and_sizes_are_counted_in_the_formats_samples():
    pcm = ALL_PCM16[:480].tobytes()
    assert PCM_IN.decode(pcm) is pcm and PCM_OUT.encode(pcm) == pcm
    assert PCM_IN.seconds(48_000) == 1.0 and PCMU.seconds(8_000) == 1.0 and PCMA.seconds(800) == 0.1
    assert PCM_IN.to_wire() == {"type": "audio/pcm", "rate": 24000} and PCMU.to_wire() == {"type": "audio/pcmu"}


def test_a_reply_is_resampled_chunk_by_chunk_to_8_khz_without_losing_its_tone():
    t = np.arange(OUTPUT_RATE) / OUTPUT_RATE  # 1 s of 440 Hz at 24 kHz, in 20 ms chunks
    tone = (np.sin(2 * np.pi * 440 * t) * 16000).astype("<i2")
    encoder = ReplyEncoder(PCMU)
    step = OUTPUT_RATE // 50
    chunks = [encoder.encode(tone[i:i + step].tobytes()) for i in range(0, tone.size, step)]
    assert 7_800 <= sum(map(len, chunks)) < 8_000  # the resampler holds ~21 ms back...
    wire = b"".join(chunks) + encoder.flush()
    assert len(wire) == 8_000  # ...until the reply's end: one byte a sample at 8 kHz, nothing lost
    back = np.frombuffer(PCMU.decode(wire), "<i2").astype(np.float32)
    spectrum = np.abs(np.fft.rfft(back[1000:7000]))
    assert abs(np.argmax(spectrum) * 8000 / 6000 - 440) < 3  # the tone, at its pitch, no chunk-edge clicks
    assert 0.6 * 16000 < np.abs(back[1000:7000]).max() < 1.1 * 16000
