"""The session's turn loop with fakes around it (deterministic, no models): the real session code,
endpointing, chunker, timeline and outbox semantics, with fake VAD/ASR/retriever/LLM/TTS engines."""

import asyncio
import json

import numpy as np
import pytest

from sub250.engine import ThreadedEngine
from sub250.protocol import parse_client_event
from tests.unit.session.fakes import FakeLLM, FakePassage, FakeRetriever, feed, make_session, silence, speech, wait_for


async def test_spoken_turn_flows_through_every_stage():
    session, t, stack = make_session(speculative=False)
    await feed(session, silence(0.3) + speech(1.0) + silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"
    types = t.types()
    order = ["session.created", "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
             "input_audio_buffer.committed", "response.created",
             "conversation.item.input_audio_transcription.completed", "sub250.sources",
             "response.output_audio_transcript.delta", "response.output_audio.delta", "response.done"]
    assert [types.index(x) for x in order] == sorted(types.index(x) for x in order)
    lat = (await wait_for(t, "sub250.turn.latency", 2))[-1]
    assert lat["final"] and lat["outcome"] == "completed"
    for mark in ("speech_start", "speech_end", "turn_commit", "asr_final", "retrieval_start", "retrieval_end",
                 "prompt_ready", "llm_submit", "first_token", "first_token_sent", "first_audio", "first_audio_sent",
                 "response_done"):
        assert mark in lat["marks"], mark
    assert lat["spans"]["network_rtt"] == 1.5
    assert lat["beside"]["spec_acceptance"] == 0.5
    # the audio given to ASR starts with the prefix padding and holds the whole utterance
    assert 1.0 * 16000 <= stack.asr.calls[-1] <= 1.9 * 16000
    # the retrieved passage reached the prompt
    assert "nine months" in stack.llm.prompts[-1][-1]["content"]
    # history: user transcript, then the assistant's full reply
    assert [h.role for h in session.conversation] == ["user", "assistant"]
    assert list(session.conversation)[-1].text == "Replace the filter every nine months. Thanks for asking!"
    assert "error" not in types, [e for e in t.sent if e["type"] == "error"]


async def test_a_client_gets_only_the_sub250_events_it_asked_for():
    session, t, _ = make_session(include=())  # a GA client: asked for none
    await feed(session, silence(0.3) + speech(1.0) + silence(0.8))
    await wait_for(t, "response.done")
    await asyncio.sleep(0.3)  # the final latency report would follow the audio
    assert not [x for x in t.types() if x.startswith("sub250.")]
    assert "conversation.item.input_audio_transcription.completed" in t.types()
    await session.handle(parse_client_event('{"type": "session.update", "session": {"include": ["sub250.latency"]}}'), 0)
    await session.handle(parse_client_event('{"type": "response.create"}'), 0)
    await wait_for(t, "sub250.turn.latency", 2)
    assert {x for x in t.types() if x.startswith("sub250.")} == {"sub250.turn.latency"}
    await session.close()


async def test_a_response_echoes_the_metadata_of_its_response_create():
    session, t, _ = make_session()
    await session.handle(parse_client_event(json.dumps({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "How often?"}]}})), 0)
    await session.handle(parse_client_event(json.dumps(
        {"type": "response.create", "response": {"metadata": {"client_event_id": "ev_7"}}})), 0)
    done = (await wait_for(t, "response.done"))[0]
    created = next(e for e in t.sent if e["type"] == "response.created")
    assert created["response"]["metadata"] == done["response"]["metadata"] == {"client_event_id": "ev_7"}
    await session.handle(parse_client_event('{"type": "response.create"}'), 0)
    assert (await wait_for(t, "response.done", 2))[1]["response"]["metadata"] is None  # the GA API's null
    await session.close()


async def test_pcm_audio_of_an_odd_length_is_refused_and_g711_of_any_length_taken():
    import base64

    session, t, _ = make_session()
    odd = json.dumps({"type": "input_audio_buffer.append", "event_id": "ev_1",
                      "audio": base64.b64encode(bytes(5)).decode()})
    await session.handle(parse_client_event(odd), 0)
    err = t.sent[-1]
    assert err["type"] == "error" and err["error"]["code"] == "invalid_audio" and err["error"]["event_id"] == "ev_1"
    await session.handle(parse_client_event(json.dumps({"type": "session.update", "session": {"audio": {
        "input": {"format": {"type": "audio/pcmu"}}}}})), 0)
    await session.handle(parse_client_event(odd), 0)
    assert t.types().count("error") == 1  # the mu-law bytes, five samples, were taken
    await session.close()


async def test_a_g711_session_hears_mu_law_and_answers_in_a_law_at_8_khz():
    import base64

    from sub250.audio.formats import PCMA, PCMU
    from sub250.audio.pcm import float32_to_pcm16, pcm16_to_float32, resample

    session, t, stack = make_session(speculative=False)
    await session.handle(parse_client_event(json.dumps({"type": "session.update", "session": {"audio": {
        "input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcma"}}}}})), 0)
    assert t.sent[-1]["session"]["audio"]["output"]["format"] == {"type": "audio/pcma"}
    call = silence(0.3) + speech(1.0) + silence(0.8)
    mu_law = PCMU.encode(float32_to_pcm16(resample(pcm16_to_float32(call), 24000, 8000)))
    for i in range(0, len(mu_law), 160):  # 20 ms frames, one byte a sample; an odd length is fine
        await session.handle(parse_client_event(json.dumps(
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(mu_law[i:i + 161]).decode()})), 0)
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"
    assert 1.0 * 16000 <= stack.asr.calls[-1] <= 1.9 * 16000  # the whole utterance reached the recognizer
    types = t.types()
    deltas = [base64.b64decode(e["delta"]) for e in t.sent if e["type"] == "response.output_audio.delta"]
    # every synthesis (0.2 s each) at 8 kHz, one byte a sample: the resampler's tail sent before the audio's done
    assert sum(map(len, deltas)) == pytest.approx(len(stack.tts.texts) * 0.2 * 8000, abs=2)
    assert max(i for i, x in enumerate(types) if x == "response.output_audio.delta") < \
        types.index("response.output_audio.done")
    assert set(b"".join(deltas)) == set(PCMA.encode(bytes(2)))  # the fake voice's silence, in A-law
    assert "error" not in types
    await session.close()


async def test_barge_in_cancels_aborts_and_keeps_only_what_was_sent():
    llm = FakeLLM(words=[f"word{i}" for i in range(200)], delay=0.01)
    session, t, stack = make_session(llm=llm)
    await feed(session, speech(0.8) + silence(0.8))
    await wait_for(t, "response.output_audio.delta", 2)
    await feed(session, speech(0.3))  # the caller talks over the reply
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    assert llm.aborted, "the engine request must be aborted"
    sent = "".join(e["delta"] for e in t.sent if e["type"] == "response.output_audio_transcript.delta")
    assistant = [h for h in session.conversation if h.role == "assistant"][0]
    # the history keeps the words whose audio went out (the text runs ahead of the audio)
    heard = session.responses.latest.delivery.words_sent
    assert assistant.text.split() == sent.split()[:round(heard)] and 0 < len(assistant.text.split()) < 200
    assert session.stats.cancelled == 1


async def test_dead_retriever_gives_an_error_and_the_reply_still_comes():
    session, t, _ = make_session(retriever=FakeRetriever(fail=True))
    await feed(session, speech(0.8) + silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    errors = [e["error"] for e in t.sent if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["retrieval_unavailable"] and errors[0]["type"] == "server_error"
    assert done["response"]["status"] == "completed"


async def test_engine_failure_fails_the_response_not_the_session():
    llm = FakeLLM(fail=True)
    session, t, _ = make_session(llm=llm)
    await feed(session, speech(0.8) + silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "failed"
    assert any(e["type"] == "error" and e["error"]["code"] == "response_failed" for e in t.sent)
    llm.fail = False
    await feed(session, speech(0.8) + silence(0.8))
    done = (await wait_for(t, "response.done", 2))[-1]
    assert done["response"]["status"] == "completed"


async def test_client_commit_mode():
    session, t, _ = make_session()
    await session.handle(parse_client_event(
        '{"type": "session.update", "session": {"audio": {"input": {"turn_detection": null}}}}'), 0)
    await feed(session, speech(0.8) + silence(0.8))
    assert "input_audio_buffer.speech_started" not in t.types()
    await session.handle(parse_client_event('{"type": "input_audio_buffer.commit"}'),
                         __import__("time").perf_counter_ns())
    await wait_for(t, "conversation.item.input_audio_transcription.completed")
    assert "response.created" not in t.types()  # with turn_detection null the client asks for the reply
    await session.handle(parse_client_event('{"type": "response.create"}'), __import__("time").perf_counter_ns())
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"


async def test_close_stops_a_running_reply():
    llm = FakeLLM(words=[f"word{i}" for i in range(500)], delay=0.01)
    session, t, _ = make_session(llm=llm)
    await feed(session, speech(0.8) + silence(0.8))
    await wait_for(t, "response.output_audio_transcript.delta")
    await session.close()
    assert llm.aborted


# --- speculative end of turn ------------------------------------------------------------------------


async def test_speculative_reply_is_adopted_at_the_commit_and_ready_at_once():
    llm = FakeLLM()
    session, t, stack = make_session(llm=llm, speculative=True)
    await feed(session, speech(1.0) + silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"
    lat = (await wait_for(t, "sub250.turn.latency", 2))[-1]
    assert lat["speculative"] is True and lat["final"]
    m, sp = lat["marks"], lat["spans"]
    # the reply was prepared during the silence: the engine saw it before the commit
    assert m["llm_submit"] < m["turn_commit"] <= m["asr_final"] <= m["prompt_ready"] <= m["first_token_sent"]
    assert sp["retrieval"] is None and lat["beside"]["retrieval_ahead"] is not None
    assert sp["asr_finalize"] == 0 and sp["prompt"] == 0
    assert sp["ttft"] < 100  # released at the commit
    assert session.stats.speculative_started == 1 and session.stats.speculative_adopted == 1
    assert session.stats.speculative_discarded == 0
    # nothing was sent before the commit
    types = t.types()
    assert types.index("input_audio_buffer.committed") < types.index("response.created")
    assert types.count("response.created") == 1


async def test_a_pause_mid_sentence_throws_the_speculation_away_and_nothing_reaches_the_client():
    llm = FakeLLM(delay=0.05)  # still generating when the caller goes on
    session, t, stack = make_session(llm=llm, speculative=True)
    await feed(session, speech(0.6) + silence(0.2))  # a breath: long enough to speculate, too short to commit
    assert session.stats.speculative_started == 1
    await asyncio.sleep(0.05)
    before = t.types()
    assert "response.created" not in before and "conversation.item.input_audio_transcription.completed" not in before
    await feed(session, speech(0.5) + silence(0.8))  # the caller goes on, then really stops
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"
    c = session.stats.as_dict()
    assert (c["speculative_started"], c["speculative_adopted"], c["speculative_discarded"]) == (2, 1, 1)
    assert llm.aborted, "the thrown-away engine request is aborted"
    types = t.types()
    assert types.count("response.created") == 1 and types.count("response.done") == 1
    assert types.count("conversation.item.input_audio_transcription.completed") == 1
    assert len([e for e in t.sent if e["type"] == "sub250.turn.latency" and e["final"]]) == 1


async def test_reused_work_gives_the_same_reply_as_a_fresh_run():
    results = []
    for speculative in (True, False):
        session, t, stack = make_session(speculative=speculative)
        await feed(session, speech(1.0) + silence(0.8))
        await wait_for(t, "response.done")
        transcript = [e["transcript"] for e in t.sent
                      if e["type"] == "conversation.item.input_audio_transcription.completed"]
        sources = [e["sources"] for e in t.sent if e["type"] == "sub250.sources"]
        reply = "".join(e["delta"] for e in t.sent if e["type"] == "response.output_audio_transcript.delta")
        results.append((transcript, sources, reply, stack.llm.prompts[-1]))
    assert results[0] == results[1]


async def test_counters_on_a_scripted_sequence():
    session, t, _ = make_session(llm=FakeLLM(delay=0.002), speculative=True)
    # three breaths inside one turn, then the end; then a second turn with no breath
    await feed(session, speech(0.4) + silence(0.15) + speech(0.4) + silence(0.15) + speech(0.4) + silence(0.15)
               + speech(0.4) + silence(0.8))
    await wait_for(t, "response.done")
    await feed(session, speech(0.6) + silence(0.8))
    await wait_for(t, "response.done", 2)
    c = session.stats.as_dict()
    assert (c["speculative_started"], c["speculative_adopted"], c["speculative_discarded"]) == (5, 2, 3)


async def test_retrieval_ahead_on_stable_partials_is_reused_at_the_commit():
    """Partials that repeat and grow are searched while the caller speaks; the committed question is then
    served by the query cache and the search is reported as retrieval_ahead, off the critical path."""
    from sub250.rag.query_cache import QueryCache
    from sub250.rag.retriever import Retriever

    class Embedder(ThreadedEngine):
        def embed_one(self, text):
            return np.array([1.0, 0.0], dtype=np.float32)

    class Store:
        queries = 0

        async def search(self, vec, k):
            Store.queries += 1
            return [FakePassage()]

    retriever = Retriever(Embedder(), Store(), k=3, cache=QueryCache(near_threshold=0.99))
    session, t, stack = make_session(retriever=retriever, speculative=False)
    await feed(session, silence(0.3) + speech(2.4) + silence(0.8))
    await wait_for(t, "response.done")
    lat = (await wait_for(t, "sub250.turn.latency", 2))[-1]
    partials = [e for e in t.sent if e["type"] == "sub250.transcript.partial"]
    assert len(partials) >= 2, "two equal partials make a stable one"
    assert Store.queries == 1, "searched once, ahead; the commit reused it"
    assert lat["retrieval_cache"] == "exact"
    assert lat["beside"]["retrieval_ahead"] is not None and lat["beside"]["retrieval_ahead"] > 0
    assert lat["spans"]["retrieval"] is not None and lat["spans"]["retrieval"] < 50
    assert retriever.cache.counts == {"exact": 1, "near": 0, "miss": 0}  # the ahead search is not counted


async def send(session, event):
    import json
    import time

    await session.handle(parse_client_event(json.dumps(event)), time.perf_counter_ns())


LOOKUP = {"type": "function", "name": "lookup_order", "description": "Look up an order.",
          "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                         "required": ["order_number"]}}


async def test_a_tool_round_trip_over_the_session_call_output_answer():
    llm = FakeLLM(words='{"name": "lookup_order", "arguments": {"order_number": "7"}}'.split(" "))
    session, t, _ = make_session(llm=llm)
    await send(session, {"type": "session.update", "session": {"tools": [LOOKUP], "output_modalities": ["text"]}})
    assert t.sent[-1]["session"]["tools"][0]["name"] == "lookup_order"
    await send(session, {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is order 7?"}]}})
    await send(session, {"type": "response.create"})
    await wait_for(t, "response.done")
    call = t.sent[t.types().index("response.done")]["response"]["output"][0]
    assert call["type"] == "function_call" and call["arguments"] == '{"order_number":"7"}'
    # an output for a call nobody made is refused; the right one joins the conversation
    await send(session, {"type": "conversation.item.create", "item": {
        "type": "function_call_output", "call_id": "call_nope", "output": "x"}})
    assert t.sent[-1]["type"] == "error" and t.sent[-1]["error"]["code"] == "function_call_not_found"
    await send(session, {"type": "conversation.item.create", "item": {
        "type": "function_call_output", "call_id": call["call_id"], "output": '{"status": "shipped"}'}})
    assert t.sent[-1]["type"] == "conversation.item.done" and t.sent[-1]["item"]["type"] == "function_call_output"
    llm.words = "Order 7 has shipped.".split()
    await send(session, {"type": "response.create"})
    await wait_for(t, "response.done", n=2)
    answer = [e for e in t.sent if e["type"] == "response.done"][1]["response"]["output"][0]
    assert answer["type"] == "message" and answer["content"][0]["text"] == "Order 7 has shipped."
    assert 'Result of lookup_order: {"status": "shipped"}' in llm.prompts[-1][-1]["content"]
    reports = [e for e in t.sent if e["type"] == "sub250.turn.latency" and e["final"]]
    assert reports[-1]["beside"]["tool"] >= 0  # the client's time with the tool, measured by the server


async def test_a_response_forcing_a_tool_it_does_not_have_is_refused_before_it_starts():
    session, t, _ = make_session(llm=FakeLLM(words='{"order_number": "7"}'.split(" ")))
    await send(session, {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}})
    await send(session, {"type": "response.create", "response": {"tool_choice": {"type": "function", "name": "x"}}})
    assert t.sent[-1]["type"] == "error" and t.sent[-1]["error"]["param"] == "response.tool_choice"
    assert "response.created" not in t.types() and session.reply is None
    await send(session, {"type": "response.create", "response": {"tools": [LOOKUP],
                                                                 "tool_choice": {"type": "function", "name": "lookup_order"}}})
    await wait_for(t, "response.done")
    assert "response.function_call_arguments.done" in t.types()  # per-response tools and a forced choice


def user_text(text, **extra):
    return {"type": "conversation.item.create", **extra,
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


async def test_items_go_where_previous_item_id_says_and_can_be_retrieved():
    session, t, _ = make_session()
    await send(session, {**user_text("first"), "item": {**user_text("first")["item"], "id": "i1"}})
    await send(session, {**user_text("second"), "item": {**user_text("second")["item"], "id": "i2"}})
    await send(session, {**user_text("between", previous_item_id="i1"), "item": {**user_text("x")["item"], "id": "i3"}})
    await send(session, {**user_text("first of all", previous_item_id="root"),
                         "item": {**user_text("y")["item"], "id": "i0"}})
    assert [i.id for i in session.conversation] == ["i0", "i1", "i3", "i2"]
    added = [e for e in t.sent if e["type"] == "conversation.item.added"]
    assert added[2]["previous_item_id"] == "i1" and added[3]["previous_item_id"] is None
    await send(session, user_text("lost", previous_item_id="nope"))
    assert t.sent[-1]["error"]["code"] == "item_not_found" and t.sent[-1]["error"]["param"] == "previous_item_id"
    await send(session, {"type": "conversation.item.retrieve", "item_id": "i3"})
    assert t.sent[-1]["type"] == "conversation.item.retrieved" and t.sent[-1]["item"]["id"] == "i3"
    await send(session, {"type": "conversation.item.retrieve", "item_id": "nope"})
    assert t.sent[-1]["error"]["code"] == "item_not_found"


async def test_a_failed_transcription_of_a_client_commit_is_told_and_the_session_goes_on():
    session, t, stack = make_session()

    def broken(audio, *, window=None):
        raise RuntimeError("onnx: bad shape")

    stack.asr.transcribe = broken
    await send(session, {"type": "session.update", "session": {"audio": {"input": {"turn_detection": None}}}})
    await feed(session, speech(0.8) + silence(0.3))
    await send(session, {"type": "input_audio_buffer.commit"})
    failed = (await wait_for(t, "conversation.item.input_audio_transcription.failed"))[0]
    assert failed["error"]["code"] == "transcription_failed" and "onnx" not in failed["error"]["message"]
    assert "conversation.item.input_audio_transcription.completed" not in t.types()
    await send(session, user_text("still there?"))
    await send(session, {"type": "response.create"})
    assert (await wait_for(t, "response.done"))[0]["response"]["status"] == "completed"


async def test_output_audio_buffer_clear_over_a_websocket_is_a_documented_error():
    session, t, _ = make_session()
    await send(session, {"type": "output_audio_buffer.clear", "event_id": "e1"})
    err = t.sent[-1]["error"]
    assert (err["code"], err["param"], err["event_id"]) == ("unsupported_event", "type", "e1")


async def test_a_transcription_session_transcribes_each_turn_and_never_replies():
    session, t, stack = make_session()
    await send(session, {"type": "session.update", "session": {"type": "transcription"}})
    updated = t.sent[-1]["session"]
    assert updated["type"] == "transcription" and updated["object"] == "realtime.transcription_session"
    assert "instructions" not in updated and updated["audio"]["input"]["transcription"] == {"model": "whisper"}
    await feed(session, silence(0.3) + speech(1.0) + silence(0.8))
    done = (await wait_for(t, "conversation.item.input_audio_transcription.completed"))[0]
    assert done["transcript"] == stack.asr.texts[0]
    await asyncio.sleep(0.05)
    assert "response.created" not in t.types() and stack.llm.requests == []
    await send(session, {"type": "response.create"})
    assert t.sent[-1]["error"]["code"] == "unsupported_event"
    await send(session, {"type": "session.update", "session": {"type": "realtime"}})  # back to a conversation
    assert t.sent[-1]["session"]["type"] == "realtime"


async def test_each_response_begins_with_the_keys_rate_limits_when_the_gateway_gives_them():
    session, t, _ = make_session()
    session.rate_limits = lambda: [{"name": "requests", "limit": 64, "remaining": 60, "reset_seconds": 0.008}]
    await send(session, user_text("hello"))
    await send(session, {"type": "response.create"})
    await wait_for(t, "response.done")
    types = t.types()
    assert types.index("rate_limits.updated") == types.index("response.created") + 1
    assert t.sent[types.index("rate_limits.updated")]["rate_limits"][0]["remaining"] == 60


def with_idle_timeout(session, ms):
    from dataclasses import replace

    td = replace(session.config.turn_detection, idle_timeout_ms=ms)  # the API's 5000 ms floor skipped: a test
    session.config = replace(session.config, turn_detection=td, output_modalities=("text",))
    session.recognition.detector.configure(td)


async def test_a_long_silence_after_a_response_triggers_one_nudge_and_no_more():
    llm = FakeLLM(words="Are you still there?".split())
    session, t, _ = make_session(llm=llm)
    with_idle_timeout(session, 50)
    await send(session, user_text("How long does the filter last?"))
    await send(session, {"type": "response.create"})
    await wait_for(t, "response.done")
    triggered = (await wait_for(t, "input_audio_buffer.timeout_triggered"))[0]
    done = (await wait_for(t, "response.done", n=2))[1]
    assert done["response"]["status"] == "completed"
    assert "(The caller has said nothing for a while.)" in llm.prompts[-1][-1]["content"]
    assert session.conversation.get(triggered["item_id"]) is not None  # the silent turn is in the history
    await asyncio.sleep(0.2)
    assert t.types().count("input_audio_buffer.timeout_triggered") == 1  # one nudge in a row at most


async def test_speech_before_the_idle_timeout_disarms_it():
    session, t, _ = make_session()
    with_idle_timeout(session, 300)
    await send(session, user_text("hello"))
    await send(session, {"type": "response.create"})
    await wait_for(t, "response.done")
    await feed(session, speech(0.5))  # the caller speaks again (and is still speaking)
    await asyncio.sleep(0.5)
    assert "input_audio_buffer.timeout_triggered" not in t.types()


async def test_the_transcription_prompt_primes_partials_and_the_final_transcript():
    session, t, stack = make_session()
    session.configure({"type": "realtime", "audio": {"input": {"transcription": {
        "model": "whisper-1", "prompt": "Halden Aero, Care+"}}}})
    await feed(session, silence(0.3) + speech(1.6) + silence(0.8))
    assert (await wait_for(t, "response.done"))[0]["response"]["status"] == "completed"
    finals = [p for p, w in zip(stack.asr.prompts, stack.asr.windows) if w is None]
    partials = [p for p, w in zip(stack.asr.prompts, stack.asr.windows) if w is not None]
    assert finals and set(finals) == {"Halden Aero, Care+"}
    assert set(partials) <= {"Halden Aero, Care+"}
    assert session.config.to_wire()["audio"]["input"]["transcription"]["prompt"] == "Halden Aero, Care+"
