"""ReplyOutput: a reply's way out - tagged with its id, held while speculative, released in order, or dropped."""

import pytest

from sub250.session.output import ReplyOutput
from tests.unit.session.fakes import RecordingTransport


def ev(name: str) -> dict:
    return {"type": name}


def test_live_output_passes_through_tagged_with_the_response_id():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1")
    assert not out.held
    seen = []
    out.send(ev("delta"), on_sent=seen.append)
    out.send(ev("response.done"), keep=True)
    out.send_audio(b"\x01\x00", on_sent=seen.append)
    out.audio_done()
    assert t.calls == [("event", ev("delta"), "resp_1"), ("event", ev("response.done"), None),
                       ("audio", b"\x01\x00", "resp_1", "item_1"), ("audio_done", "resp_1")]
    assert len(seen) == 2, "on_sent reaches the transport"


def test_held_output_sends_nothing_until_release_then_everything_in_order():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1", held=True)
    assert out.held
    seen = []
    out.send(ev("response.created"), keep=True)
    out.send(ev("sources"))
    out.send_audio(b"\x01\x00", on_sent=lambda ns: seen.append("audio"))
    out.send(ev("delta"), on_sent=lambda ns: seen.append("delta"))
    out.send(ev("response.done"), keep=True)
    assert t.calls == [] and seen == []
    assert out.release() == 5
    assert not out.held
    assert t.calls == [("event", ev("response.created"), None), ("event", ev("sources"), "resp_1"),
                       ("audio", b"\x01\x00", "resp_1", "item_1"), ("event", ev("delta"), "resp_1"),
                       ("event", ev("response.done"), None)]
    assert seen == ["audio", "delta"], "each on_sent travels with what it belongs to"
    out.send(ev("after"))  # released: straight through
    assert t.calls[-1] == ("event", ev("after"), "resp_1")


def test_release_of_a_live_output_sends_nothing():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1")
    assert out.release() == 0 and t.calls == []


def test_purge_while_held_drops_what_is_held_and_not_the_transport():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1", held=True)
    out.send(ev("sources"))
    out.send_audio(b"\x00\x00")
    assert out.purge() == 2
    assert t.calls == [], "nothing was in the transport to purge"
    out.send(ev("later"))
    assert out.release() == 1
    assert t.calls == [("event", ev("later"), "resp_1")]


def test_purge_while_held_keeps_lifecycle_events():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1", held=True)
    out.send(ev("response.created"), keep=True)
    out.send(ev("delta"))
    out.purge()
    out.release()
    assert [c[1]["type"] for c in t.calls] == ["response.created"]


def test_purge_of_a_live_output_purges_the_transport_by_response_id():
    t = RecordingTransport(delayed=True)
    out = ReplyOutput(t, "resp_1", "item_1")
    out.send(ev("delta"), on_sent=lambda ns: None)
    out.send_audio(b"\x00\x00", on_sent=lambda ns: None)
    other = ReplyOutput(t, "resp_2", "item_2")
    other.send(ev("delta"), on_sent=lambda ns: None)
    assert out.purge() == 2
    assert t.calls[-1] == ("purge", "resp_1")
    assert [p[1] for p in t.pending] == ["resp_2"], "only this reply's queued output is dropped"


def test_discard_drops_everything_and_later_sends_are_ignored():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1", held=True)
    out.send(ev("response.created"), keep=True)
    out.send_audio(b"\x00\x00")
    out.discard()
    out.send(ev("late"), keep=True)
    out.send_audio(b"\x01\x00")
    out.audio_done()
    assert out.release() == 0
    out.send(ev("after release"))
    assert t.calls == []


def test_discard_of_a_live_output_stops_it():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1")
    out.send(ev("one"))
    out.discard()
    out.send(ev("two"))
    out.send_audio(b"\x00\x00")
    out.audio_done()
    assert t.calls == [("event", ev("one"), "resp_1")]


def test_paused_output_holds_and_resume_plays_on_in_order():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1")
    out.send_audio(b"\x01\x00")
    out.pause()
    assert out.paused and not out.held, "paused is live, not speculative"
    out.send(ev("delta"))
    out.send_audio(b"\x02\x00")
    out.send(ev("response.done"), keep=True)
    assert t.calls == [("audio", b"\x01\x00", "resp_1", "item_1"), ("pause", "resp_1")]
    assert out.resume() == 3
    assert t.calls[2:] == [("resume", "resp_1"), ("event", ev("delta"), "resp_1"),
                           ("audio", b"\x02\x00", "resp_1", "item_1"), ("event", ev("response.done"), None)]
    assert out.resume() == 0, "once"


def test_stopping_a_paused_output_drops_held_and_queued_audio_and_sends_the_lifecycle_events():
    t = RecordingTransport(delayed=True)
    out = ReplyOutput(t, "resp_1", "item_1")
    out.send_audio(b"\x01\x00", on_sent=lambda ns: None)  # queued in the transport, not yet sent
    out.pause()
    out.send_audio(b"\x02\x00")
    out.send(ev("response.done"), keep=True)
    assert out.stop() == 2  # one held, one in the transport
    assert ("purge", "resp_1") in t.calls and ("resume", "resp_1") in t.calls
    assert t.calls[-1] == ("event", ev("response.done"), None)
    assert not any(c[0] == "audio" and c[1] == b"\x02\x00" for c in t.calls)


def test_a_speculative_output_is_not_paused():
    t = RecordingTransport()
    out = ReplyOutput(t, "resp_1", "item_1", held=True)
    out.pause()
    assert out.held and not out.paused and t.calls == []
