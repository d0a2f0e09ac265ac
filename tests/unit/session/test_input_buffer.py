"""InputBuffer: PCM16 at any rate in, 512-sample windows at 16 kHz out, numbered from the session's start."""

import numpy as np
import pytest

from sub250.audio.rates import ASR_RATE, INPUT_RATE
from sub250.audio.vad import WINDOW
from sub250.session.input_buffer import InputBuffer


def pcm(samples) -> bytes:
    return np.asarray(samples, dtype="<i2").tobytes()


def ramp(n, start=0) -> bytes:
    """``n`` PCM16 samples whose values count up from ``start`` (so windows can be told apart)."""
    return pcm(np.arange(start, start + n) % 30000)


def window(value: float) -> np.ndarray:
    return np.full(WINDOW, value, dtype=np.float32)


def test_cut_at_16khz_carries_the_remainder_to_the_next_call():
    buf = InputBuffer()
    first = buf.cut(ramp(700), ASR_RATE)
    assert len(first) == 1 and first[0].shape == (WINDOW,)
    second = buf.cut(ramp(400, start=700), ASR_RATE)
    assert len(second) == 1  # 188 carried + 400 = 588: one window, 76 left
    # the second window starts with the 188 samples the first call left over, in order
    expected = np.arange(WINDOW, 2 * WINDOW) / 32768.0
    np.testing.assert_allclose(second[0], expected.astype(np.float32))
    assert buf.cut(ramp(435, start=1100), ASR_RATE) == []  # 76 + 435 = 511: still short of a window
    assert len(buf.cut(ramp(1), ASR_RATE)) == 1
    assert len(buf) == 0, "cut() only cuts; append() stores"


def test_cut_at_16khz_gives_exact_window_counts():
    buf = InputBuffer()
    assert len(buf.cut(ramp(WINDOW * 5), ASR_RATE)) == 5
    assert len(buf.cut(ramp(WINDOW - 1), ASR_RATE)) == 0
    assert len(buf.cut(ramp(1), ASR_RATE)) == 1


def test_cut_at_24khz_resamples_to_16khz_windows():
    buf = InputBuffer()
    tone = (np.sin(2 * np.pi * 440 * np.arange(INPUT_RATE) / INPUT_RATE) * 8000).astype("<i2")
    windows = []
    for i in range(0, tone.size, 480):  # 20 ms frames
        windows += buf.cut(tone[i:i + 480].tobytes(), INPUT_RATE)
    # one second at 24 kHz is 16000 samples at 16 kHz = 31.25 windows, less the resampler's short delay
    assert 29 <= len(windows) <= 31
    assert all(w.shape == (WINDOW,) and w.dtype == np.float32 for w in windows)
    # still a 440 Hz tone, now at 16 kHz: count zero crossings over the middle windows
    mid = np.concatenate(windows[5:25])
    crossings = np.count_nonzero(np.diff(np.signbit(mid)))
    assert crossings / 2 / (mid.size / ASR_RATE) == pytest.approx(440, rel=0.02)


def test_cut_keeps_one_resampler_per_rate():
    """Interleaving rates does not mix their resampling state: each rate's stream resamples on its own."""
    alone, mixed = InputBuffer(), InputBuffer()
    a = [alone.cut(ramp(480, i * 480), INPUT_RATE) for i in range(20)]
    m = []
    for i in range(20):
        m.append(mixed.cut(ramp(480, i * 480), INPUT_RATE))
        mixed.cut(b"", ASR_RATE)  # another rate in between changes nothing of the 24 kHz stream
    assert [len(x) for x in a] == [len(x) for x in m]
    np.testing.assert_array_equal(np.concatenate(sum(a, [])), np.concatenate(sum(m, [])))


def test_append_numbers_windows_from_the_session_start_across_clear_and_keep_last():
    buf = InputBuffer()
    assert buf.empty and buf.end == 0 and buf.start == 0
    assert buf.append([window(0), window(1), window(2)], arrival_ns=100) == 0
    assert buf.append([window(3)], arrival_ns=200) == 3
    assert (buf.start, buf.end, len(buf)) == (0, 4, 4)
    buf.clear()
    assert (buf.start, buf.end, len(buf)) == (4, 4, 0) and buf.empty
    assert buf.append([window(4), window(5), window(6), window(7)], arrival_ns=300) == 4
    buf.keep_last(2)
    assert (buf.start, buf.end, len(buf)) == (6, 8, 2)
    assert buf.audio(6)[0] == 6 and buf.audio(7)[0] == 7
    buf.keep_last(5)  # more than held: nothing dropped
    assert (buf.start, buf.end) == (6, 8)
    assert buf.append([window(8)], arrival_ns=400) == 8


def test_arrival_is_by_absolute_index():
    buf = InputBuffer()
    assert buf.last_arrival() is None
    buf.append([window(0), window(1)], arrival_ns=10)
    buf.append([window(2)], arrival_ns=20)
    assert [buf.arrival(i) for i in range(3)] == [10, 10, 20]
    buf.keep_last(1)
    assert buf.arrival(2) == 20 and buf.last_arrival() == 20
    buf.append([window(3)], arrival_ns=30)
    assert buf.arrival(3) == 30 and buf.last_arrival() == 30


def test_audio_first_last_is_inclusive():
    buf = InputBuffer()
    buf.append([window(v) for v in range(6)], arrival_ns=0)
    buf.keep_last(4)  # windows 2..5 held
    got = buf.audio(3, 4)
    assert got.size == 2 * WINDOW and got[0] == 3 and got[-1] == 4
    assert buf.audio(3).size == 3 * WINDOW and buf.audio(3)[-1] == 5  # default: up to the newest
    assert buf.audio(5, 5).size == WINDOW
    assert buf.audio(0).size == 4 * WINDOW and buf.audio(0)[0] == 2  # from before the start: what is held
    assert buf.audio(6).size == 0


def test_audio_of_windows_no_longer_held_is_empty():
    buf = InputBuffer()
    buf.append([window(v) for v in range(10)], arrival_ns=0)
    buf.keep_last(5)  # windows 5..9 held
    assert buf.audio(0, 3).size == 0


def test_take_returns_the_turn_and_empties_the_buffer():
    buf = InputBuffer()
    buf.append([window(v) for v in range(5)], arrival_ns=0)
    got = buf.take(2)
    assert got.size == 3 * WINDOW and got[0] == 2 and got[-1] == 4
    assert len(buf) == 0 and (buf.start, buf.end) == (5, 5)
    assert buf.append([window(5)], arrival_ns=1) == 5


def test_clear_keeps_pending_samples_unless_asked():
    buf = InputBuffer()
    buf.cut(ramp(100), ASR_RATE)
    buf.clear()
    assert not buf.empty, "the 100 samples short of a window are still pending"
    assert len(buf.cut(ramp(WINDOW - 100), ASR_RATE)) == 1
    buf.cut(ramp(100), ASR_RATE)
    buf.clear(pending=True)
    assert buf.empty
    assert buf.cut(ramp(WINDOW - 100), ASR_RATE) == []


def test_flush_pending_pads_to_a_window_with_silence():
    buf = InputBuffer()
    windows = buf.cut(ramp(700, start=1), ASR_RATE)
    buf.append(windows, arrival_ns=5)
    buf.flush_pending(arrival_ns=9)
    assert (buf.end, len(buf)) == (2, 2)
    padded = buf.audio(1, 1)
    assert padded.size == WINDOW
    np.testing.assert_allclose(padded[:188], (np.arange(WINDOW + 1, 701) / 32768.0).astype(np.float32))
    assert not padded[188:].any(), "the rest of the window is silence"
    assert buf.arrival(1) == 9
    buf.flush_pending(arrival_ns=10)  # nothing pending: nothing stored
    assert buf.end == 2
    assert len(buf.cut(ramp(WINDOW), ASR_RATE)) == 1, "nothing left over after the flush"


def test_flush_pending_with_nothing_pending_keeps_the_buffer_empty():
    buf = InputBuffer()
    buf.flush_pending(arrival_ns=1)
    assert buf.empty and buf.end == 0


def test_a_commit_keeps_all_the_audio_appended_at_24khz():
    buf = InputBuffer()
    for i in range(50):  # 1 s in 20 ms frames
        buf.append(buf.cut(ramp(480, i * 480), INPUT_RATE), arrival_ns=i)
    buf.flush_pending(arrival_ns=99)
    audio = buf.take(buf.start)
    heard = np.flatnonzero(audio)[-1] + 1  # the padding after it is silence
    assert heard >= ASR_RATE - 10  # 1 s at 16 kHz


def test_ms_and_held_ms():
    assert InputBuffer.ms(0) == 0 and InputBuffer.ms(1) == 32 and InputBuffer.ms(10) == 320
    assert InputBuffer.ms(3) == 96
    buf = InputBuffer()
    buf.append([window(0)] * 4, arrival_ns=0)
    assert buf.held_ms() == 128.0
    buf.keep_last(1)
    assert buf.held_ms() == 32.0
