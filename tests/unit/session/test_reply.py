"""Reply: one reply's state machine, driven directly with fake engines and a recording transport.

Whatever happens to a reply - completed, cancelled (even before its task ran), failed, held then adopted or
discarded - it reaches one end state and says exactly one ``response.done`` (none when discarded)."""

import asyncio
import json
import logging
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from sub250.audio.rates import ASR_RATE
from sub250.audio.vad import WINDOW
from sub250.metrics.timeline import now_ns
from sub250.session.conversation import Conversation, Item
from sub250.session.output import ReplyOutput
from sub250.session.reply import Reply, ReplyOptions, ReplyState
from sub250.session.reply_context import ReplyContext
from sub250.session.stats import SessionStats
from sub250.tasks import TaskSet
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from tests.unit.session.fakes import (FakeASR, FakeLLM, FakeRetriever, FakeTTS, RecordingTransport, ToneTTS,
                                      fake_engines, wait_until)

QUESTION = "how often do I change the filter"
ANSWER = "Replace the filter every nine months. Thanks for asking!"
TEXT = ("text",)
AUDIO = ("audio", "text")

TEXT_REPLY = (["response.created", "sub250.sources", "response.output_item.added", "conversation.item.added",
               "response.content_part.added"] + ["response.output_text.delta"] * len(ANSWER.split())
              + ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                 "conversation.item.done", "response.done", "sub250.turn.latency"])


def build(*, held=False, audio=None, modalities=TEXT, llm=None, tts=None, asr=None, transport=None,
          retriever=None, picker=None, tuning=None):
    """A reply to QUESTION (typed, or spoken when ``audio`` is given), started; nothing awaited yet."""
    transport = transport or RecordingTransport()
    stack = fake_engines(asr=asr or FakeASR(), retriever=retriever or FakeRetriever(),
                         llm=llm or FakeLLM(abort_on_close=False), tts=tts or FakeTTS(), picker=picker)
    turn = UserTurn.new("item_user", transcript=None if audio is not None else QUESTION)
    turn.timeline.mark("turn_commit")
    conversation = Conversation()
    conversation.add(Item(turn.item_id, "user", "input_audio" if audio is not None else "input_text", turn.transcript))
    stats = SessionStats()
    output = ReplyOutput(transport, "resp_1", "item_reply", held=held)
    context = ReplyContext(stack, tuning or PipelineTuning(), conversation, stats, "sess_1")
    reply = Reply(context, turn, ReplyOptions("Be brief.", modalities, 64), output, audio=audio, started_ns=now_ns())
    tasks = TaskSet()
    reply.start(tasks.spawn)
    return SimpleNamespace(reply=reply, t=transport, stack=stack, turn=turn, conversation=conversation, stats=stats,
                           tasks=tasks)


async def ended(reply: Reply) -> None:
    """Until the reply's task has ended and its done callback has run."""
    await asyncio.wait([reply.task])
    await asyncio.sleep(0)


def spoken(seconds=1.0) -> np.ndarray:
    return np.full(int(ASR_RATE * seconds), 0.1, dtype=np.float32)


def done_events(t):
    return t.of("response.done")


# --- a live reply ----------------------------------------------------------------------------------


async def test_a_live_text_reply_says_every_stage_in_order_and_joins_the_conversation():
    r = build()
    assert r.reply.active and r.reply.state is ReplyState.LIVE
    await ended(r.reply)
    assert r.t.types() == TEXT_REPLY
    assert r.reply.state is ReplyState.DONE and not r.reply.active
    # lifecycle events are untagged (never purged); the reply's output is tagged with its id
    tags = {c[1]["type"]: c[2] for c in r.t.calls}
    assert tags["response.created"] is None and tags["response.done"] is None
    assert tags["sub250.sources"] == "resp_1" and tags["response.output_text.delta"] == "resp_1"
    assert "".join(e["delta"] for e in r.t.of("response.output_text.delta")) == ANSWER
    done = done_events(r.t)[0]["response"]
    assert done["status"] == "completed" and done["status_details"] is None
    assert done["output"][0]["content"] == [{"type": "output_text", "text": ANSWER}]
    created = r.t.of("response.created")[0]["response"]
    assert created["status"] == "in_progress" and created["output_modalities"] == ["text"]
    item = r.conversation.get("item_reply")
    assert (item.role, item.part, item.text, item.status) == ("assistant", "output_text", ANSWER, "completed")
    assert r.conversation.last_id == "item_reply"
    lat = r.t.of("sub250.turn.latency")
    assert len(lat) == 1 and lat[0]["final"] is True and lat[0]["outcome"] == "completed"
    assert lat[0]["speculative"] is False
    # what the engine was asked
    req = r.stack.llm.requests[0]
    assert req.request_id == r.reply.engine_request_id and req.max_tokens == 64 and req.prompt_token_ids == [1, 2, 3]
    assert QUESTION in req.messages[-1]["content"]
    assert not [c for c in r.t.calls if c[0] in ("audio", "audio_done")], "a text reply has no audio"


async def test_a_spoken_turn_is_transcribed_and_published_first():
    r = build(audio=spoken())
    await ended(r.reply)
    types = r.t.types()
    assert types[:5] == ["response.created", "conversation.item.input_audio_transcription.delta",
                         "conversation.item.input_audio_transcription.completed", "conversation.item.done",
                         "sub250.sources"]
    assert r.t.of("conversation.item.input_audio_transcription.delta")[0]["delta"] == QUESTION
    assert r.t.of("conversation.item.input_audio_transcription.completed")[0]["transcript"] == QUESTION
    assert r.conversation.get("item_user").text == QUESTION
    assert r.stack.asr.calls == [ASR_RATE]


async def test_a_reply_to_silence_completes_with_no_output():
    r = build(audio=np.zeros(WINDOW - 1, dtype=np.float32))
    await ended(r.reply)
    assert r.t.types() == ["response.created", "conversation.item.input_audio_transcription.delta",
                           "conversation.item.input_audio_transcription.completed", "conversation.item.done",
                           "response.done"]
    assert done_events(r.t)[0]["response"]["status"] == "completed"
    assert done_events(r.t)[0]["response"]["output"] == []
    assert r.conversation.get("item_reply") is None and r.stack.llm.requests == []


async def test_an_audio_reply_sends_its_audio_then_says_it_is_done():
    r = build(modalities=AUDIO)
    await ended(r.reply)
    audio = [c for c in r.t.calls if c[0] == "audio"]
    assert audio and all(c[2:] == ("resp_1", "item_reply") for c in audio)
    assert r.t.calls.count(("audio_done", "resp_1")) == 1
    assert r.reply.delivery.audio_sent_ms == pytest.approx(r.reply.delivery.audio_queued_ms) and r.reply.delivery.audio_queued_ms > 0
    types = r.t.types()
    last_audio = max(i for i, c in enumerate(r.t.calls) if c[0] == "audio")
    assert last_audio < types.index("response.done") < types.index("audio_done")
    assert r.t.of("response.output_audio.done") and r.t.of("response.output_audio_transcript.done")
    finals = [e for e in r.t.of("sub250.turn.latency") if e["final"]]
    assert len(finals) == 1 and "first_audio_sent" in finals[0]["marks"]


# --- cancel ----------------------------------------------------------------------------------------


async def test_cancel_mid_stream_aborts_the_engine_and_says_done_once():
    llm = FakeLLM(words=[f"word{i}" for i in range(200)], abort_on_close=False, pause=asyncio.Event(), pause_at=5)
    r = build(llm=llm)
    await wait_until(lambda: len(r.t.of("response.output_text.delta")) >= 3, what="three deltas")
    r.reply.cancel("turn_detected")
    assert r.reply.state is ReplyState.CANCELLED and not r.reply.active
    await ended(r.reply)
    assert r.reply.state is ReplyState.CANCELLED
    assert llm.aborted == [r.reply.engine_request_id]
    done = done_events(r.t)
    assert len(done) == 1
    assert done[0]["response"]["status"] == "cancelled"
    assert done[0]["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert ("purge", "resp_1") in r.t.calls
    types = r.t.types()
    assert "response.output_text.delta" not in types[types.index("response.done"):]
    assert "response.output_text.done" not in types, "a cancelled reply's content is not closed as complete"
    sent = "".join(e["delta"] for e in r.t.of("response.output_text.delta"))
    item = r.conversation.get("item_reply")
    assert item.text == sent and item.status == "incomplete" and len(sent.split()) < 200
    assert r.stats.cancelled == 1
    r.reply.cancel("client_cancelled")  # a second cancel changes nothing
    await asyncio.sleep(0)
    assert len(done_events(r.t)) == 1 and r.stats.cancelled == 1


async def test_cancel_keeps_in_the_conversation_only_the_text_that_left():
    llm = FakeLLM(words=[f"word{i}" for i in range(200)], delay=0.002, abort_on_close=False)
    t = RecordingTransport(delayed=True)
    r = build(llm=llm, transport=t)
    await wait_until(lambda: len(t.of("response.output_text.delta")) >= 3, what="three deltas")
    t.deliver()  # these left
    await wait_until(lambda: len(t.pending) >= 2, what="two more queued")
    r.reply.cancel("client_cancelled")
    assert t.pending == [], "the queued, unsent deltas were purged"
    await ended(r.reply)
    t.deliver()
    delivered = r.reply.delivery.sent
    assert delivered and r.conversation.get("item_reply").text == delivered
    assert len(delivered) < len(r.reply.delivery.text)
    assert done_events(t)[0]["response"]["status_details"]["reason"] == "client_cancelled"


async def test_a_cancelled_spoken_reply_keeps_in_the_conversation_the_words_whose_audio_left():
    """The text runs ahead of the audio: a media track plays (and reports) audio in real time, so what the
    caller heard is the words of the audio that left, not the text that was sent."""
    llm = FakeLLM(words=[f"word{i}." for i in range(60)], delay=0.03, abort_on_close=False)  # one sentence a chunk
    t, tts = RecordingTransport(delayed=True), ToneTTS(sample_rate=24000, seconds=0.2)  # a chunk: 2 pieces
    r = build(llm=llm, transport=t, modalities=AUDIO, tts=tts)
    await wait_until(lambda: sum(1 for p in t.pending if p[0] == "audio") >= 6, what="audio queued")
    audio = [p for p in t.pending if p[0] == "audio"]
    for p in audio[:4]:  # the first two chunks are played; the rest is not
        t.pending.remove(p)
        p[2](now_ns())
    t.deliver("event")  # all the text left
    r.reply.cancel("turn_detected")
    await ended(r.reply)
    item = r.conversation.get("item_reply")
    assert item.text == " ".join(tts.texts[:2]) and item.status == "incomplete"
    assert len(r.reply.delivery.sent.split()) > 2


async def test_cancel_right_after_start_before_the_task_ran_still_ends_the_reply():
    """The wedged-session regression: a reply cancelled before its task ever ran must still say
    response.done and free the session's response slot."""
    llm = FakeLLM(abort_on_close=False)
    r = build(llm=llm)
    r.reply.cancel("turn_detected")  # no await in between: the task has not run a single step
    assert not r.reply.active
    await ended(r.reply)
    assert r.reply.task.cancelled()
    assert not r.reply.active and r.reply.state is ReplyState.CANCELLED
    done = done_events(r.t)
    assert len(done) == 1 and done[0]["response"]["status"] == "cancelled"
    assert done[0]["response"]["status_details"]["reason"] == "turn_detected"
    assert [e["type"] for e in r.t.events] == ["response.created", "response.done"]
    assert llm.requests == [] and llm.aborted == [], "nothing was submitted, nothing to abort"
    assert r.stats.cancelled == 1
    assert r.conversation.get("item_reply") is None


# --- failure ---------------------------------------------------------------------------------------


async def test_a_failing_engine_fails_the_reply_with_a_generic_error(caplog):
    llm = FakeLLM(fail=True, abort_on_close=False)
    r = build(llm=llm)
    with caplog.at_level(logging.ERROR, logger="sub250.session.reply"):
        await ended(r.reply)
    assert r.reply.state is ReplyState.FAILED and not r.reply.active
    errors = r.t.of("error")
    assert len(errors) == 1
    err = errors[0]["error"]
    assert err["code"] == "response_failed" and err["type"] == "server_error"
    assert "the vLLM engine died" not in json.dumps(r.t.events), "no exception text reaches the client"
    assert "EngineError" not in json.dumps(r.t.events)
    done = done_events(r.t)
    assert len(done) == 1 and done[0]["response"]["status"] == "failed"
    assert done[0]["response"]["status_details"]["error"] == {"type": "server_error", "code": "response_failed",
                                                                "message": err["message"]}
    # the details are in the log, under the error id the client was given
    error_id = err["message"].rsplit("error id ", 1)[1].rstrip(")")
    logged = [rec for rec in caplog.records if error_id in rec.getMessage()]
    assert logged and logged[0].exc_info and "the vLLM engine died" in str(logged[0].exc_info[1])
    assert r.stats.errors == 1
    item = r.conversation.get("item_reply")
    assert item.status == "incomplete" and item.text == "Replace the"  # the two words that were sent
    assert r.t.types().index("error") < r.t.types().index("response.done")


SECRET = "injected failure /secret/path 0xdeadbeef"


class RaisingASR(FakeASR):
    """Raises on its first ``fails`` transcriptions, then transcribes as FakeASR does."""

    def __init__(self, fails=1):
        super().__init__()
        self.fails = fails

    def transcribe(self, audio, *, window=None, prompt=None, final=False):
        if self.fails:
            self.fails -= 1
            raise RuntimeError(f"ASR: {SECRET}")
        return super().transcribe(audio, window=window, prompt=prompt, final=final)


class RaisingTTS(FakeTTS):
    def __init__(self, fails=1):
        super().__init__()
        self.fails = fails
        self.texts = []

    def synthesize(self, text):
        self.texts.append(text)
        if self.fails:
            self.fails -= 1
            raise RuntimeError(f"TTS: {SECRET}")
        yield from super().synthesize(text)


def assert_failed_cleanly(r):
    """One generic ``response_failed`` error, then one failed ``response.done``; nothing of the exception."""
    assert r.reply.state is ReplyState.FAILED and not r.reply.active, "the response slot is free again"
    errors = r.t.of("error")
    assert [e["error"]["code"] for e in errors] == ["response_failed"]
    assert "error id err_" in errors[0]["error"]["message"]
    wire = json.dumps(r.t.events)
    assert SECRET not in wire and "RuntimeError" not in wire, "no exception text reaches the client"
    done = done_events(r.t)
    assert len(done) == 1 and done[0]["response"]["status"] == "failed"
    assert done[0]["response"]["status_details"]["error"]["code"] == "response_failed"
    assert r.t.types().index("error") < r.t.types().index("response.done")
    assert r.stats.errors == 1


async def test_an_asr_exception_fails_the_spoken_turn_cleanly_and_the_next_turn_completes():
    asr, llm = RaisingASR(), FakeLLM(abort_on_close=False)
    r = build(audio=spoken(), asr=asr, llm=llm)
    await ended(r.reply)
    assert_failed_cleanly(r)
    assert llm.requests == [], "nothing was asked of the LLM"
    assert r.t.of("conversation.item.input_audio_transcription.completed") == []
    failed, = r.t.of("conversation.item.input_audio_transcription.failed")
    assert failed["item_id"] == "item_user" and failed["error"]["code"] == "transcription_failed"
    assert "error id" in failed["error"]["message"] and "RuntimeError" not in failed["error"]["message"]
    assert r.conversation.get("item_reply") is None
    # the same engines answer the next turn
    again = build(audio=spoken(), asr=asr, llm=llm)
    await ended(again.reply)
    assert again.reply.state is ReplyState.DONE and again.t.of("error") == []
    assert "".join(e["delta"] for e in again.t.of("response.output_text.delta")) == ANSWER


async def test_an_asr_exception_in_a_held_reply_fails_it_at_the_commit():
    r = build(held=True, audio=spoken(), asr=RaisingASR())
    await ended(r.reply)
    assert r.t.calls == [], "a held reply says nothing, even its failure, before the commit"
    r.reply.adopt(now_ns())
    assert_failed_cleanly(r)


async def test_a_tts_exception_fails_the_spoken_reply_cleanly_and_the_next_turn_completes():
    tts, llm = RaisingTTS(), FakeLLM(abort_on_close=False)
    r = build(modalities=AUDIO, tts=tts, llm=llm)
    await ended(r.reply)
    assert_failed_cleanly(r)
    assert not [c for c in r.t.calls if c[0] == "audio"], "the failed synthesis gave no audio"
    assert r.t.calls.count(("audio_done", "resp_1")) == 1, "the client is told the audio ended"
    # the caller heard none of it: the history has no word of it either (its text went out, its audio never did)
    assert r.conversation.get("item_reply") is None
    again = build(modalities=AUDIO, tts=tts, llm=llm)
    await ended(again.reply)
    assert again.reply.state is ReplyState.DONE and again.t.of("error") == []
    assert [c for c in again.t.calls if c[0] == "audio"]


# --- held (speculative) ----------------------------------------------------------------------------


async def test_a_held_reply_finished_before_the_commit_says_everything_at_adopt_as_a_live_one_would():
    live = build(audio=spoken())
    await ended(live.reply)

    r = build(held=True, audio=spoken())
    assert r.reply.state is ReplyState.HELD and r.reply.active
    await ended(r.reply)
    assert r.t.calls == [], "nothing of a held reply reaches the transport"
    assert r.reply.state is ReplyState.HELD and r.reply.active
    assert r.conversation.get("item_user").text is None, "the transcript is published at the commit"
    assert r.conversation.get("item_reply") is None

    r.reply.adopt(now_ns())
    assert r.reply.state is ReplyState.DONE and not r.reply.active
    assert r.t.types() == live.t.types()
    assert len(done_events(r.t)) == 1 and done_events(r.t)[0]["response"]["status"] == "completed"
    assert [e.get("delta") for e in r.t.events] == [e.get("delta") for e in live.t.events]
    assert r.conversation.get("item_user").text == QUESTION
    assert r.conversation.get("item_reply").text == ANSWER
    assert r.stats.speculative_adopted == 1
    lat = r.t.of("sub250.turn.latency")
    assert len(lat) == 1 and lat[0]["final"] and lat[0]["speculative"] is True
    r.reply.adopt(now_ns())  # a second adopt changes nothing
    assert len(done_events(r.t)) == 1 and r.stats.speculative_adopted == 1


async def test_a_held_reply_adopted_mid_stream_goes_on_live():
    pause = asyncio.Event()
    llm = FakeLLM(abort_on_close=False, pause=pause, pause_at=3)
    r = build(held=True, llm=llm)
    await wait_until(lambda: r.turn.timeline.has("first_token"), what="the first token")
    assert r.t.calls == []
    r.reply.adopt(now_ns())
    assert r.reply.state is ReplyState.LIVE and r.t.types()[0] == "response.created"
    assert len(r.t.of("response.output_text.delta")) <= 3 and done_events(r.t) == []
    pause.set()
    await ended(r.reply)
    assert r.t.types() == TEXT_REPLY
    assert "".join(e["delta"] for e in r.t.of("response.output_text.delta")) == ANSWER
    assert r.reply.state is ReplyState.DONE


async def test_a_held_reply_discarded_mid_stream_never_reaches_the_transport_and_is_aborted():
    llm = FakeLLM(words=[f"word{i}" for i in range(200)], abort_on_close=False, pause=asyncio.Event(), pause_at=5)
    r = build(held=True, llm=llm, modalities=AUDIO)
    await wait_until(lambda: r.turn.timeline.has("first_token"), what="the first token")
    r.reply.discard()
    assert r.reply.state is ReplyState.DISCARDED and not r.reply.active
    await ended(r.reply)
    await asyncio.sleep(0.02)  # anything still in flight would show now
    assert r.t.calls == []
    assert llm.aborted == [r.reply.engine_request_id]
    assert r.reply.state is ReplyState.DISCARDED
    assert r.stats.speculative_discarded == 1 and r.stats.cancelled == 0
    assert r.conversation.get("item_reply") is None
    r.reply.adopt(now_ns())  # too late: a discarded reply stays discarded
    assert r.t.calls == [] and r.reply.state is ReplyState.DISCARDED


async def test_a_held_reply_discarded_before_it_submitted_aborts_nothing():
    gate = threading.Event()
    asr = FakeASR(gate=gate)
    llm = FakeLLM(abort_on_close=False)
    r = build(held=True, audio=spoken(), asr=asr, llm=llm)
    await wait_until(asr.entered.is_set, what="the transcription")
    r.reply.discard()
    gate.set()
    await ended(r.reply)
    assert r.t.calls == [] and llm.requests == [] and llm.aborted == []
    assert r.reply.state is ReplyState.DISCARDED


async def test_a_held_reply_discarded_before_its_task_ran():
    llm = FakeLLM(abort_on_close=False)
    r = build(held=True, llm=llm)
    r.reply.discard()
    await ended(r.reply)
    assert r.reply.task.cancelled() and r.reply.state is ReplyState.DISCARDED
    assert r.t.calls == [] and llm.aborted == []


async def test_cancel_does_not_touch_a_held_reply():
    """A held reply is discarded, never cancelled: cancel() leaves it held."""
    r = build(held=True)
    r.reply.cancel("turn_detected")
    assert r.reply.state is ReplyState.HELD
    await ended(r.reply)
    assert r.t.calls == []
    r.reply.adopt(now_ns())
    assert done_events(r.t)[0]["response"]["status"] == "completed"


# --- the final latency report ----------------------------------------------------------------------


async def test_the_final_latency_report_waits_until_the_first_audio_left_and_comes_once():
    t = RecordingTransport(delayed=True)
    r = build(modalities=AUDIO, transport=t)
    await ended(r.reply)
    assert r.reply.state is ReplyState.DONE
    assert len(done_events(t)) == 1
    assert t.of("sub250.turn.latency") == [], "nothing has reached the caller yet"
    t.deliver("event")  # the text left; the audio has not
    assert t.of("sub250.turn.latency") == []
    assert t.deliver("audio") > 1
    lat = t.of("sub250.turn.latency")
    assert len(lat) == 1 and lat[0]["final"] is True
    assert "first_audio_sent" in lat[0]["marks"] and "first_token_sent" in lat[0]["marks"]
    assert lat[0]["marks"]["first_audio_sent"] >= lat[0]["marks"]["response_done"]
    t.deliver()
    assert len(t.of("sub250.turn.latency")) == 1


async def test_audio_leaving_before_the_text_gives_an_early_report_then_one_final():
    t = RecordingTransport(delayed=True)
    r = build(modalities=AUDIO, transport=t)
    await ended(r.reply)
    t.deliver("audio")
    lat = t.of("sub250.turn.latency")
    assert [e["final"] for e in lat] == [False]
    t.deliver()
    assert [e["final"] for e in t.of("sub250.turn.latency")] == [False, True]
    t.deliver()
    assert len(t.of("sub250.turn.latency")) == 2


# --- bugs found ------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["cancelled", "failed"])
async def test_no_audio_reaches_the_transport_after_the_reply_ended(how):
    gate = threading.Event()
    tts = ToneTTS(gate=gate)
    words = "Hello there, this is the first sentence and it goes on".split() + [f"word{i}" for i in range(100)]
    llm = FakeLLM(words=words, delay=0.002, abort_on_close=False, fail=how == "failed", fail_at=20)
    r = build(modalities=AUDIO, llm=llm, tts=tts)
    await wait_until(tts.entered.is_set, what="the first synthesis")
    if how == "cancelled":
        r.reply.cancel("turn_detected")
    await ended(r.reply)
    assert len(done_events(r.t)) == 1
    gate.set()
    await tts.run(lambda: None)  # the synthesis in flight has finished (one TTS thread)
    await asyncio.sleep(0.02)
    types = r.t.types()
    assert "audio" not in types[types.index("response.done"):]


async def test_truncate_after_the_audio_left_scales_by_all_of_the_reply_audio():
    t = RecordingTransport(delayed=True)
    r = build(modalities=AUDIO, transport=t)
    await ended(r.reply)
    t.deliver()  # now all of it was played
    total_ms = r.reply.delivery.audio_queued_ms
    assert total_ms > 0 and r.reply.delivery.audio_sent_ms == pytest.approx(total_ms)
    item = r.conversation.truncate("item_reply", int(total_ms / 2))
    assert len(item.text.split()) <= len(ANSWER.split()) // 2 + 1



# --- the answer's paths (app/answer) --------------------------------------------------------------


async def test_a_declined_question_is_answered_with_the_fixed_text_and_no_engine_request():
    from dataclasses import replace

    from sub250.answer.policy import DECLINE_TEXT, AnswerPolicy

    llm = FakeLLM(abort_on_close=False)
    r = build(llm=llm, modalities=AUDIO, tuning=replace(PipelineTuning(), answer=AnswerPolicy(min_score=0.95)))
    await ended(r.reply)
    assert r.reply.state is ReplyState.DONE and llm.requests == [] and llm.prompts == []
    assert r.reply.delivery.text == DECLINE_TEXT and r.conversation.get("item_reply").text == DECLINE_TEXT
    assert r.t.calls.count(("audio_done", "resp_1")) == 1 and r.reply.delivery.audio_sent_ms > 0
    (final,) = [e for e in r.t.of("sub250.turn.latency") if e["final"]]
    assert final["answer"]["path"] == "declined" and final["spans"]["prefill"] is None
    assert final["spans"]["ttft"] is not None


async def test_a_looping_reply_is_stopped_at_the_second_time_and_its_request_aborted():
    llm = FakeLLM(words="It is a high-end, high-end, high-end, high-end purifier.".split(), abort_on_close=True)
    r = build(llm=llm)
    await ended(r.reply)
    assert r.reply.state is ReplyState.DONE
    assert r.reply.delivery.text == "It is a high-end, high-end," and llm.aborted == [r.reply.engine_request_id]
    (final,) = [e for e in r.t.of("sub250.turn.latency") if e["final"]]
    assert final["answer"]["stopped_loop"] == "high end"


async def test_the_final_report_waits_for_the_turn_s_round_trip_measurement():
    from dataclasses import replace

    from sub250.answer.policy import AnswerPolicy

    pong = asyncio.Event()

    async def rtt():
        await pong.wait()

    r = build(tuning=replace(PipelineTuning(), answer=AnswerPolicy(min_score=0.95)))  # declined: done at once
    r.turn.rtt = asyncio.ensure_future(rtt())
    await ended(r.reply)
    assert r.t.of("response.done") and not [e for e in r.t.of("sub250.turn.latency") if e["final"]]
    r.turn.timeline.measured["network_rtt"] = 1.5
    pong.set()
    await wait_until(lambda: [e for e in r.t.of("sub250.turn.latency") if e["final"]], what="the final report")
    (final,) = [e for e in r.t.of("sub250.turn.latency") if e["final"]]
    assert final["spans"]["network_rtt"] == 1.5
