import asyncio
import json

from sub250.transport.outbox import Outbox


async def test_outbox_writes_in_order_reports_sent_and_purges_by_tag():
    box = Outbox()
    written, sent = [], []
    box.send({"type": "a"})
    box.send({"type": "audio", "n": 1}, tag="resp1", on_sent=lambda ns: sent.append(ns))
    box.send({"type": "audio", "n": 2}, tag="resp1")
    box.send({"type": "b"})
    assert box.purge("resp1") == 1 + 1

    async def write(data):
        written.append(data)

    task = asyncio.ensure_future(box.run(write))
    await asyncio.sleep(0.01)
    box.send({"type": "c"}, on_sent=lambda ns: sent.append(ns))
    await asyncio.sleep(0.01)
    box.close()
    await asyncio.wait_for(task, 1)
    assert [w.split('"type":"')[1].split('"')[0] for w in written] == ["a", "b", "c"]
    assert len(sent) == 1 and sent[0] > 0


def _delta(n: int) -> dict:
    return {"type": "response.output_audio.delta", "delta": "A" * n}


def test_outbox_is_bounded_audio_of_the_oldest_reply_goes_first_then_it_closes():
    overflows = []
    box = Outbox(max_bytes=15_000, on_overflow=lambda: overflows.append(True))
    box.send({"type": "session.created"})
    for _ in range(3):
        box.send(_delta(2000), tag="r1", audio=True)
    box.send({"type": "response.done", "id": "r1"}, tag="r1")
    for _ in range(3):
        box.send(_delta(2000), tag="r2", audio=True)
    assert box.dropped_audio == 0 and 12_000 < box.queued_bytes <= 15_000
    box.send(_delta(3000), tag="r2", audio=True)  # over: r1's queued audio (3 deltas) is dropped, nothing else
    assert box.dropped_audio == 3 and box.queued_bytes <= 15_000
    assert [json.loads(i.text).get("id") for i in box._q if '"delta"' not in i.text] == [None, "r1"]
    assert sum('"delta"' in i.text for i in box._q) == 4 and not box.overflowed
    box.send({"type": "x", "pad": "p" * 6000})  # over again: r2's audio goes too
    assert box.dropped_audio == 7 and not overflows
    box.send({"type": "x", "pad": "p" * 10_000})  # no audio left to drop: the client is not reading
    assert box.overflowed and box.closed and overflows == [True]
    assert len(box) == 0 and box.queued_bytes == 0
    box.send({"type": "late"})  # closed: ignored
    assert len(box) == 0


async def test_outbox_counts_bytes_as_they_are_written_and_purged():
    box = Outbox(max_bytes=1 << 20)
    box.send({"type": "a"})
    size = box.queued_bytes
    assert size == len('{"type":"a"}')
    box.send(_delta(100), tag="r", audio=True)
    assert box.purge("r") == 1 and box.queued_bytes == size
    written = []

    async def write(text):
        written.append(text)

    task = asyncio.ensure_future(box.run(write))
    await asyncio.sleep(0.01)
    assert written == ['{"type":"a"}'] and box.queued_bytes == 0
    box.close()
    await asyncio.wait_for(task, 1)
