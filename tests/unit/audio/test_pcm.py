import numpy as np
import pytest

from sub250.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32, resample


def test_pcm16_round_trip():
    x = np.array([0.0, 0.5, -0.5, 0.999], dtype=np.float32)
    y = pcm16_to_float32(float32_to_pcm16(x))
    assert np.allclose(x, y, atol=1 / 32768 * 2)


def test_odd_byte_count_is_rejected():
    with pytest.raises(ValueError):
        pcm16_to_float32(b"\x00\x01\x02")


def test_resample_keeps_duration_and_pitch():
    sr = 24000
    t = np.arange(sr) / sr
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, sr, 16000)
    assert abs(out.size - 16000) <= 2
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) - 440) <= 1  # 1 Hz bins over one second


def test_stream_resampler_matches_length_over_chunks():
    rs = StreamResampler(48000, 16000)
    chunks = [np.zeros(960, dtype=np.float32) for _ in range(50)]  # 1 s in 20 ms frames
    total = sum(rs.process(c).size for c in chunks) + rs.process(np.zeros(0, dtype=np.float32), last=True).size
    assert abs(total - 16000) <= 2
