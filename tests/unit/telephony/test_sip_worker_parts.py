"""The SIP worker's parts that do no I/O: its messages (app/telephony/sip_wire.py) and a call's reply frames
(app/telephony/sip_player.py)."""

from __future__ import annotations

import pytest

from sub250.telephony.sip_player import FRAME_BYTES, SILENCE, FramePlayer
from sub250.telephony.sip_wire import HEADER, MAX_JSON, Decoder, WireError, encode


def test_messages_come_out_whole_however_the_stream_is_cut():
    data = encode("audio", b"\x01\x02" * 160, key=3, t=12) + encode("ended", key=3, reason="200 OK")
    for cut in (1, 7, HEADER.size, len(data) - 1):
        decoder = Decoder()
        out = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
        assert out == [({"op": "audio", "key": 3, "t": 12}, b"\x01\x02" * 160),
                       ({"op": "ended", "key": 3, "reason": "200 OK"}, b"")]


@pytest.mark.parametrize("data", [
    HEADER.pack(MAX_JSON + 1, 0),
    HEADER.pack(4, 0) + b"nope",
    HEADER.pack(2, 0) + b"[]",
    HEADER.pack(10, 0) + b'{"op": 12}',
])
def test_a_stream_that_is_not_messages_is_refused(data):
    with pytest.raises(WireError):
        Decoder().feed(data)


def frame(value: int) -> bytes:
    return bytes([value]) * FRAME_BYTES


def test_frames_come_in_order_with_the_sent_id_on_the_first_and_silence_when_empty():
    player = FramePlayer()
    player.push("r1", frame(1) + frame(2)[:100], sent=7, seq=1)
    player.push("r1", frame(2)[100:], sent=None, seq=2)
    player.finish("r1", seq=3)
    assert player.next_frame() == (frame(1), 7, None)
    assert player.next_frame() == (frame(2), None, 3)  # the queue emptied after command 3
    assert player.next_frame() == (SILENCE, None, None)


def test_a_short_last_frame_is_padded_and_keeps_its_sent_id():
    player = FramePlayer()
    player.push("r1", b"\x05" * 10, sent=4, seq=1)
    assert player.queued == 0 and player.idle_after() == 1
    player.finish("r1", seq=2)
    data, sent, idle = player.next_frame()
    assert data == b"\x05" * 10 + bytes(FRAME_BYTES - 10) and sent == 4 and idle == 2


def test_a_paused_reply_waits_and_a_dropped_one_goes():
    player = FramePlayer()
    player.push("r1", frame(1), sent=None, seq=1)
    player.push("r2", frame(2), sent=None, seq=2)
    player.pause("r1", True, seq=3)
    assert player.next_frame()[0] == frame(2)
    assert player.next_frame()[0] == SILENCE and player.queued == 1 and player.idle_after() is None
    assert player.drop("r1", seq=4) == 1
    assert player.idle_after() == 4
    player.push("r3", frame(3), sent=None, seq=5)
    assert player.drop(None, seq=6) == 1 and player.next_frame()[0] == SILENCE
