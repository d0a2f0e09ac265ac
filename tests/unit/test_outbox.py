import asyncio

from app.transport.outbox import Outbox


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
