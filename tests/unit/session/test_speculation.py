"""Speculation: the reply held at the caller's first pause, adopted at the commit or thrown away."""

import asyncio
import threading
from dataclasses import replace

import numpy as np
import pytest

from sub250.asr.base import Need

from sub250.metrics.timeline import now_ns
from sub250.protocol.session_config import SessionConfig
from sub250.session.conversation import Conversation, Item
from sub250.session.output import ReplyOutput
from sub250.session.reply import Reply, ReplyOptions, ReplyState
from sub250.session.reply_context import ReplyContext
from sub250.session.speculation import Speculation
from sub250.session.stats import SessionStats
from sub250.tasks import TaskSet
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from tests.unit.session.fakes import FakeLLM, RecordingTransport, fake_engines


@pytest.mark.parametrize(("override", "speculate_after_ms", "enabled"), [
    (None, 64, True),     # the profile's tuning decides
    (None, 0, False),
    (True, 0, True),      # the session's setting beats the profile
    (False, 64, False),
])
def test_enabled_the_session_setting_beats_the_profile(override, speculate_after_ms, enabled):
    config = replace(SessionConfig(id="sess_1"), speculative_turns=override)
    assert Speculation.enabled(config, PipelineTuning(speculate_after_ms=speculate_after_ms)) is enabled


class Held:
    """Held replies on turns of one conversation, over one recording transport."""

    def __init__(self):
        self.t = RecordingTransport()
        self.conversation = Conversation()
        self.stats = SessionStats()
        self.tasks = TaskSet()
        self.stack = fake_engines(llm=FakeLLM(abort_on_close=False))

    def reply(self, turn: UserTurn, rid: str, audio=None) -> Reply:
        self.conversation.add(Item(turn.item_id, "user", "input_audio" if audio is not None else "input_text",
                                   turn.transcript))
        context = ReplyContext(self.stack, PipelineTuning(), self.conversation, self.stats, "sess_1")
        reply = Reply(context, turn, ReplyOptions("Be brief.", ("text",), 32),
                      ReplyOutput(self.t, rid, f"item_{rid}", held=True), started_ns=now_ns(), audio=audio)
        reply.start(self.tasks.spawn)
        return reply


def turn(name: str) -> UserTurn:
    t = UserTurn.new(name, transcript="how often do I change the filter")
    t.timeline.mark("turn_commit")
    return t


async def ended(*replies: Reply) -> None:
    await asyncio.wait([r.task for r in replies])
    await asyncio.sleep(0)


async def test_commit_adopts_the_held_reply_of_the_same_turn():
    h, spec = Held(), Speculation()
    first = turn("item_1")
    reply = h.reply(first, "resp_1")
    spec.hold(reply)
    await ended(reply)
    assert h.t.calls == []
    assert spec.commit(first, now_ns()) is True
    assert spec.held is None
    assert reply.state is ReplyState.DONE
    assert h.t.of("response.done")[0]["response"]["id"] == "resp_1"
    assert h.stats.speculative_adopted == 1 and h.stats.speculative_discarded == 0
    assert first.timeline.speculative is True


async def test_commit_of_another_turn_discards_the_held_reply():
    h, spec = Held(), Speculation()
    reply = h.reply(turn("item_1"), "resp_1")
    spec.hold(reply)
    assert spec.commit(turn("item_2"), now_ns()) is False
    assert spec.held is None
    assert reply.state is ReplyState.DISCARDED
    await ended(reply)
    assert h.t.calls == [], "the discarded reply never reached the client"
    assert h.stats.speculative_discarded == 1 and h.stats.speculative_adopted == 0


async def test_commit_with_nothing_held_or_a_reply_no_longer_held():
    h, spec = Held(), Speculation()
    assert spec.commit(turn("item_1"), now_ns()) is False
    t = turn("item_2")
    reply = h.reply(t, "resp_2")
    reply.discard()
    spec.hold(reply)
    assert spec.commit(t, now_ns()) is False
    assert spec.held is None and reply.state is ReplyState.DISCARDED
    await ended(reply)
    assert h.t.calls == [] and h.stats.speculative_adopted == 0


async def test_speech_resumed_discards_the_held_reply():
    h, spec = Held(), Speculation()
    t = turn("item_1")
    reply = h.reply(t, "resp_1")
    spec.hold(reply)
    spec.speech_resumed()
    assert spec.held is None and reply.state is ReplyState.DISCARDED
    await ended(reply)
    assert h.t.calls == [] and h.stats.speculative_discarded == 1
    assert spec.commit(t, now_ns()) is False, "nothing is left to adopt"
    spec.speech_resumed()  # nothing held: nothing happens
    assert h.stats.speculative_discarded == 1


async def test_a_new_hold_after_a_discard_is_adopted():
    h, spec = Held(), Speculation()
    t = turn("item_1")
    first = h.reply(t, "resp_1")
    spec.hold(first)
    spec.speech_resumed()
    second = h.reply(t, "resp_2")
    spec.hold(second)
    await ended(first, second)
    assert spec.commit(t, now_ns()) is True
    assert [e["response"]["id"] for e in h.t.of("response.done")] == ["resp_2"]
    assert all(c[2] in (None, "resp_2") for c in h.t.calls if c[0] == "event")


async def test_a_held_replys_transcript_is_speculative_work_until_the_commit_adopts_it():
    """Beside other sessions' calls on the shared recognizer (app/asr/base.py's Need): AHEAD while held, FINAL
    once committed, read when the engine frees, so a reply committed while it waits is served as committed."""
    h, spec = Held(), Speculation()
    h.stack.asr.gate = gate = threading.Event()
    t = turn("item_1")
    reply = h.reply(t, "resp_1", audio=np.zeros(16000, dtype=np.float32))
    spec.hold(reply)
    await asyncio.wait_for(asyncio.to_thread(h.stack.asr.entered.wait, 5), 6)
    (need,) = h.stack.asr.needs
    assert need() is Need.AHEAD
    assert spec.commit(t, now_ns()) is True
    assert need() is Need.FINAL
    gate.set()
    await ended(reply)
    assert reply.state is ReplyState.DONE
