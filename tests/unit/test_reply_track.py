"""The WebRTC reply track: real-time pacing, chunks reported when they leave, purge on barge-in,
started/stopped per reply."""

import time

import numpy as np
import pytest

from sub250.transport.webrtc import ReplyTrack

pytestmark = pytest.mark.asyncio


async def test_frames_are_paced_and_carry_the_queued_audio_in_order():
    states = []
    track = ReplyTrack(on_state=lambda tag, s: states.append((tag, s)))
    sent = []
    a = (np.arange(480 * 3) % 1000 + 1).astype("<i2").tobytes()  # 60 ms, never zero
    track.push("r1", a, on_sent=lambda ns: sent.append(("a", ns)))
    track.push("r1", b"\x07\x00" * 240, on_sent=lambda ns: sent.append(("b", ns)))  # 10 ms
    track.finish("r1")
    t0 = time.monotonic()
    frames = [await track.recv() for _ in range(6)]
    elapsed = time.monotonic() - t0
    assert 0.08 <= elapsed < 1.0  # 6 frames of 20 ms: paced (the first is immediate), not a burst
    pcm = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    assert frames[0].sample_rate == 24000 and frames[1].pts - frames[0].pts == 480
    assert pcm[:1440].tobytes() == a
    assert (pcm[1440:1680] == 7).all() and (pcm[1680:] == 0).all()  # then silence
    assert [s[0] for s in sent] == ["a", "b"]
    assert states == [("r1", "started"), ("r1", "stopped")]
    assert track.queued_ms == 0


async def test_purge_drops_only_the_cancelled_reply():
    track = ReplyTrack()
    track.push("old", b"\x01\x00" * 4800)
    track.push("new", b"\x02\x00" * 480)
    assert track.queued_ms == pytest.approx(220)
    first = await track.recv()
    assert (first.to_ndarray() == 1).all()
    assert track.purge("old") == 1
    second = await track.recv()
    assert (second.to_ndarray() == 2).all()
    track.stop()
    with pytest.raises(Exception):
        await track.recv()


async def test_a_paused_reply_plays_silence_and_resumes_where_it_stopped():
    track = ReplyTrack()
    a = (np.arange(480 * 3) % 1000 + 1).astype("<i2").tobytes()  # 60 ms
    track.push("r1", a)
    first = (await track.recv()).to_ndarray().reshape(-1)
    track.pause("r1", True)
    paused = [(await track.recv()).to_ndarray().reshape(-1) for _ in range(2)]
    assert all((p == 0).all() for p in paused) and track.queued_ms == pytest.approx(40)
    track.pause("r1", False)
    rest = np.concatenate([(await track.recv()).to_ndarray().reshape(-1) for _ in range(2)])
    assert np.concatenate([first, rest]).tobytes() == a
    track.pause("r1", True)
    track.push("r1", a)
    assert track.purge("r1") == 1
    track.push("r1", a)  # a purge forgets the pause
    assert ((await track.recv()).to_ndarray() != 0).any()
    track.stop()
