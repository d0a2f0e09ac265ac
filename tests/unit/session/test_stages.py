"""The stages of a reply, each on its own: final transcript, retrieval, prompt, generation, speech."""

import asyncio
import threading

import numpy as np
import pytest

from sub250.audio.rates import OUTPUT_RATE
from sub250.audio.vad import WINDOW
from sub250.llm.base import LLMRequest, TokenDelta
from sub250.metrics.timeline import TurnTimeline, now_ns
from sub250.session import stages
from sub250.session.stages import AUDIO_DELTA_MS, Speaker
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from tests.unit.session.fakes import FakeASR, FakeLLM, FakePassage, FakeRetriever, ToneTTS

PIECE = OUTPUT_RATE * AUDIO_DELTA_MS // 1000 * 2  # bytes of one 100 ms piece


# --- transcribe ------------------------------------------------------------------------------------


async def test_transcribe_less_than_a_window_is_empty_and_marks_asr_final():
    asr, tl = FakeASR(), TurnTimeline("t")
    assert await stages.transcribe(asr, np.zeros(WINDOW - 1, dtype=np.float32), tl) == ""
    assert asr.calls == [], "the engine is not asked"
    assert tl.has("asr_final")


async def test_transcribe_a_window_or_more_asks_the_engine_then_marks():
    asr, tl = FakeASR(texts=["hello"]), TurnTimeline("t")
    before = now_ns()
    assert await stages.transcribe(asr, np.zeros(WINDOW, dtype=np.float32), tl) == "hello"
    assert asr.calls == [WINDOW] and asr.windows == [None], "a final uses the full pass"
    assert tl.marks["asr_final"] >= before


# --- retrieve --------------------------------------------------------------------------------------


async def test_retrieve_with_a_failing_retriever_goes_on_without_context(caplog):
    turn = UserTurn.new("u")
    with caplog.at_level("WARNING", logger="sub250.session.stages"):
        got = await stages.retrieve(FakeRetriever(fail=True), "q", turn)
    assert got.failed is True and got.passages == []
    tl = turn.timeline
    assert tl.has("retrieval_start") and tl.has("retrieval_end")
    assert tl.marks["retrieval_end"] >= tl.marks["retrieval_start"]
    assert any(r.exc_info and isinstance(r.exc_info[1], ConnectionError) for r in caplog.records), "logged"


async def test_retrieve_with_no_retriever_is_failed_and_marked():
    turn = UserTurn.new("u")
    got = await stages.retrieve(None, "q", turn)
    assert got.failed and got.passages == []
    assert turn.timeline.has("retrieval_start") and turn.timeline.has("retrieval_end")


async def test_retrieve_gives_the_passages_and_how_the_cache_served_them():
    turn = UserTurn.new("u")
    retriever = FakeRetriever(served="miss")
    got = await stages.retrieve(retriever, "how often", turn)
    assert not got.failed and got.passages == [FakePassage()]
    assert retriever.calls == [("how often", True)], "the committed question counts in the hit rate"
    assert turn.timeline.retrieval_cache == "miss"
    assert "retrieval_ahead" not in turn.timeline.measured


@pytest.mark.parametrize(("served", "prefetch_ms", "ahead"), [
    ("exact", 12.5, 12.5), ("near", 7.0, 7.0), ("miss", 12.5, None), ("exact", None, None)])
async def test_a_cache_hit_on_a_search_ahead_is_reported_as_retrieval_ahead(served, prefetch_ms, ahead):
    turn = UserTurn.new("u")
    turn.prefetch_ms = prefetch_ms
    await stages.retrieve(FakeRetriever(served=served), "q", turn)
    assert turn.timeline.measured.get("retrieval_ahead") == ahead


async def test_retrieval_ahead_already_measured_is_kept():
    turn = UserTurn.new("u")
    turn.prefetch_ms = 12.5
    turn.timeline.measured["retrieval_ahead"] = 3.0  # measured by a held reply's rebase
    await stages.retrieve(FakeRetriever(served="exact"), "q", turn)
    assert turn.timeline.measured["retrieval_ahead"] == 3.0


# --- build_prompt ----------------------------------------------------------------------------------


def test_build_prompt_gives_messages_and_ids_and_marks_prompt_ready():
    llm, tl = FakeLLM(), TurnTimeline("t")
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "answer"}]
    messages, ids = stages.build_prompt(llm, PipelineTuning(), "Be brief.", "how often", [FakePassage()], history, tl)
    assert ids == [1, 2, 3] and llm.prompts == [messages]
    assert tl.has("prompt_ready")
    assert messages[0]["role"] == "system" and "Be brief." in messages[0]["content"]
    assert {"role": "user", "content": "earlier"} in messages and {"role": "assistant", "content": "answer"} in messages
    assert "how often" in messages[-1]["content"] and "nine months" in messages[-1]["content"]


def test_build_prompt_keeps_to_the_tuned_budgets():
    llm, tl = FakeLLM(), TurnTimeline("t")
    history = [{"role": "user", "content": "an old question " * 10}]
    messages, _ = stages.build_prompt(llm, PipelineTuning(history_tokens=5, context_tokens=4), "Be brief.", "q",
                                      [FakePassage(content="one two three four five six seven eight")], history, tl)
    assert len(messages) == 2, "the history did not fit its 5 tokens"
    assert "eight" not in messages[-1]["content"], "the passage was cut to its 4 tokens"


# --- generate --------------------------------------------------------------------------------------


class ScriptLLM:
    """Streams the given deltas, noting when each one was handed out."""

    def __init__(self, deltas):
        self.deltas = deltas
        self.started_ns = None
        self.yielded_ns = []

    async def stream(self, req):
        self.started_ns = now_ns()
        for d in self.deltas:
            await asyncio.sleep(0)
            self.yielded_ns.append(now_ns())
            yield d


async def test_generate_marks_and_records_the_engine_counters():
    spec = {"num_draft_tokens": 10, "num_accepted_draft_tokens": 7}
    llm = ScriptLLM([TokenDelta("", 0, prompt_tokens=120, cached_prompt_tokens=96),
                     TokenDelta("Hi", 1),
                     TokenDelta(" there", 2, prompt_tokens=999, cached_prompt_tokens=0),
                     TokenDelta("", 3, finished=True, spec_decoding=spec)])
    tl = TurnTimeline("t")
    gen = stages.generate(llm, LLMRequest("r1", []), tl)
    first = await gen.__anext__()
    assert first.text == "Hi", "a delta without text is not handed on"
    assert tl.marks["llm_submit"] <= llm.started_ns
    assert llm.yielded_ns[0] < tl.marks["first_token"] and tl.marks["first_token"] >= llm.yielded_ns[1]
    assert (tl.prompt_tokens, tl.cached_prompt_tokens) == (120, 96)
    rest = [d.text async for d in gen]
    assert rest == [" there"]
    assert tl.marks["first_token"] < llm.yielded_ns[2], "first_token is the first text, not a later one"
    assert (tl.prompt_tokens, tl.cached_prompt_tokens) == (120, 96), "the first report of the prompt stays"
    assert tl.tokens == 3 and tl.spec == spec


async def test_generate_with_no_text_marks_no_first_token():
    tl = TurnTimeline("t")
    got = [d async for d in stages.generate(ScriptLLM([TokenDelta("", 1, finished=True)]), LLMRequest("r", []), tl)]
    assert got == [] and tl.has("llm_submit") and not tl.has("first_token") and tl.tokens == 1
    assert tl.prompt_tokens is None and tl.spec is None


# --- Speaker ---------------------------------------------------------------------------------------


def levels(pieces):
    return [int(np.frombuffer(p, dtype="<i2")[0]) for p in pieces]


async def test_speaker_emits_100ms_pieces_at_24khz_in_order_and_marks_first_audio():
    tts, tl, pieces = ToneTTS(sample_rate=OUTPUT_RATE, seconds=0.25), TurnTimeline("t"), []
    emitted_ns = []

    shares = []

    def emit(view, words):
        assert isinstance(view, memoryview)
        emitted_ns.append(now_ns())
        pieces.append(bytes(view))
        shares.append(words)

    speaker = Speaker(tts, tl, emit, first_clause=True)
    for word in "Hello there, this is the first part. And here is a second sentence. Then".split():
        speaker.put(word + " ")
    await speaker.finish()
    assert tts.texts == ["Hello there,", "this is the first part.", "And here is a second sentence.", "Then"]
    # each 250 ms chunk goes out as 100 + 100 + 50 ms, chunk after chunk
    assert [len(p) for p in pieces] == [PIECE, PIECE, PIECE // 2] * 4
    assert levels(pieces) == [999] * 3 + [1999] * 3 + [2999] * 3 + [3999] * 3
    assert all(len(set(np.frombuffer(p, dtype="<i2"))) == 1 for p in pieces)
    assert tl.has("first_audio") and tl.marks["first_audio"] <= emitted_ns[0]
    # each piece carries its share of its chunk's words: 2 words over 100 + 100 + 50 ms, then 5, 6, 1
    assert shares[:3] == pytest.approx([0.8, 0.8, 0.4]) and sum(shares) == pytest.approx(14)


async def test_speaker_without_first_clause_starts_with_a_sentence():
    tts = ToneTTS(sample_rate=OUTPUT_RATE, seconds=0.1)
    speaker = Speaker(tts, TurnTimeline("t"), lambda view, words: None, first_clause=False)
    speaker.put("Hello there, this is the first part. And more")
    await speaker.finish()
    assert tts.texts == ["Hello there, this is the first part.", "And more"]


async def test_speaker_resamples_to_the_wire_rate():
    tts, pieces = ToneTTS(sample_rate=22050, seconds=1.0), []
    speaker = Speaker(tts, TurnTimeline("t"), lambda view, words: pieces.append(bytes(view)), first_clause=False)
    speaker.put("One whole sentence here. ")
    await speaker.finish()
    total = sum(len(p) for p in pieces) // 2
    assert OUTPUT_RATE * 0.95 <= total <= OUTPUT_RATE
    assert all(len(p) <= PIECE for p in pieces)


async def test_speaker_finish_speaks_all_of_the_audio():
    tts, pieces = ToneTTS(sample_rate=22050, seconds=0.2), []
    speaker = Speaker(tts, TurnTimeline("t"), lambda view, words: pieces.append(bytes(view)), first_clause=False)
    speaker.put("One whole sentence here. And a second one there. ")
    await speaker.finish()
    total = sum(len(p) for p in pieces) // 2
    assert total >= len(tts.texts) * 0.2 * OUTPUT_RATE - OUTPUT_RATE // 1000  # within 1 ms


async def test_speaker_stop_emits_nothing_more():
    gate = threading.Event()
    tts, pieces = ToneTTS(sample_rate=OUTPUT_RATE, gate=gate), []
    speaker = Speaker(tts, TurnTimeline("t"), lambda view, words: pieces.append(bytes(view)), first_clause=False)
    speaker.put("One whole sentence here. ")
    await asyncio.to_thread(tts.entered.wait, 5)
    speaker.stop()
    gate.set()
    await tts.run(lambda: None)  # the synthesis in flight has ended (one TTS thread)
    await asyncio.sleep(0.01)
    assert pieces == []


async def test_a_held_speaker_starts_no_synthesis_until_released_and_loses_nothing():
    tts, pieces = ToneTTS(sample_rate=OUTPUT_RATE, seconds=0.1), []
    speaker = Speaker(tts, TurnTimeline("t"), lambda view, words: pieces.append(bytes(view)), first_clause=False)
    speaker.hold()
    assert speaker.holding
    speaker.put("One whole sentence here. And a second one there. ")
    await asyncio.sleep(0.05)
    await tts.run(lambda: None)
    assert tts.texts == [] and pieces == []
    speaker.release()
    await speaker.finish()
    assert tts.texts == ["One whole sentence here.", "And a second one there."] and len(pieces) == 2


async def test_a_failed_synthesis_stops_the_generation_at_the_next_text():
    class BrokenTTS(ToneTTS):
        def synthesize(self, text):
            raise RuntimeError("piper broke")

    speaker = Speaker(BrokenTTS(), TurnTimeline("t"), lambda pcm, words: None, first_clause=True)
    speaker.put("Replace the filter every nine months, ")
    for _ in range(200):
        if speaker.done:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(RuntimeError, match="piper broke"):
        speaker.put("and thanks.")
    speaker.stop()
