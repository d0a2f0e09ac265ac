"""What the caller heard: the SDK's real-time player model, and the truncate it sends when talked over."""

import asyncio
import base64
import json

from websockets.asyncio.server import serve

from sub250.sdk import RealtimeClient
from sub250.sdk.playback import Playback

MS = 1_000_000  # ns


def test_a_player_fed_faster_than_real_time_is_behind_what_it_received():
    p = Playback()
    p.received("item_1", 100, now_ns=0)
    p.received("item_1", 100, now_ns=10 * MS)  # queued behind the first
    assert p.position(now_ns=150 * MS) == ("item_1", 150, 200)
    assert p.interrupt(now_ns=150 * MS) == ("item_1", 150)
    assert p.position() is None, "stopped"


def test_a_gap_in_the_deltas_is_a_gap_in_the_sound_and_a_finished_reply_needs_no_truncate():
    p = Playback()
    p.received("item_1", 100, now_ns=0)
    p.received("item_1", 100, now_ns=500 * MS)  # arrived after the first had played out
    assert p.position(now_ns=550 * MS)[1] == 150
    assert p.interrupt(now_ns=900 * MS) is None  # all of it was heard


def test_the_silence_inside_a_reply_is_counted_per_item():
    p = Playback()
    p.received("item_1", 100, now_ns=0)
    p.received("item_1", 100, now_ns=50 * MS)  # in time: queued behind the first
    assert p.stalled("item_1") == 0
    p.received("item_1", 100, now_ns=450 * MS)  # the first 200 ms had played out at 200: 250 ms of silence
    p.received("item_1", 100, now_ns=500 * MS)
    assert p.stalled("item_1") == 250 and p.stalled("item_2") is None
    p.received("item_2", 100, now_ns=10_000 * MS)  # a new reply: the wait before its first audio is no stall
    assert p.stalled("item_2") == 0 and p.stalled("item_1") is None


def test_the_applications_own_position_wins_and_a_new_item_starts_afresh():
    p = Playback()
    p.received("item_1", 300, now_ns=0)
    p.played("item_1", 40)
    assert p.position(now_ns=10_000 * MS) == ("item_1", 40, 300)
    p.received("item_2", 100, now_ns=20_000 * MS)
    assert p.position(now_ns=20_050 * MS) == ("item_2", 50, 100)


async def test_the_client_truncates_what_it_had_not_played_when_the_caller_talks_over_it():
    truncates = []

    async def handler(ws):
        await ws.send(json.dumps({"type": "session.created", "event_id": "e0", "session": {}}))
        audio = base64.b64encode(bytes(2 * 24000 * 2)).decode()  # 2 s of reply audio, at once
        await ws.send(json.dumps({"type": "response.output_audio.delta", "event_id": "e1", "response_id": "r",
                                  "item_id": "item_a", "delta": audio}))
        await asyncio.sleep(0.3)
        await ws.send(json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "e2",
                                  "audio_start_ms": 1000, "item_id": "item_u"}))
        async for raw in ws:
            truncates.append(json.loads(raw))
            break
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with RealtimeClient(f"ws://127.0.0.1:{port}/v1/realtime", "k", include=()) as client:
            await client.wait_for("input_audio_buffer.speech_started", timeout=5)
            for _ in range(100):
                if truncates:
                    break
                await asyncio.sleep(0.01)
    assert len(truncates) == 1 and truncates == client.truncations
    cut = truncates[0]
    assert cut["type"] == "conversation.item.truncate" and cut["item_id"] == "item_a" and cut["content_index"] == 0
    assert 250 <= cut["audio_end_ms"] <= 1000, cut  # ~300 ms of the 2 s were played
