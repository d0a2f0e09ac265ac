"""The LLM engine's failure signal: a request that finds vLLM's engine core dead, or the watchdog between
requests, marks the engine ``failed`` (once); an ordinary request error does not. vLLM's ``AsyncLLM`` is faked
here by an object with the public members the adapter uses (``generate``, ``errored``, ``abort``, ``shutdown``)."""

import asyncio
from types import SimpleNamespace

import pytest

from sub250.errors import EngineError
from sub250.llm import vllm_local
from sub250.llm.base import LLMRequest
from sub250.llm.vllm_local import VLLMLocalEngine


class FakeAsyncLLM:
    def __init__(self, fail_with=None, dead_after_fail=True):
        self.errored = False
        self.fail_with, self.dead_after_fail = fail_with, dead_after_fail
        self.aborted, self.shut_down = [], False

    async def generate(self, prompt, params, request_id):
        out = SimpleNamespace(finished=False, num_cached_tokens=0, outputs=[
            SimpleNamespace(text="Hello", token_ids=[1], finish_reason=None, spec_decode_metrics=None)])
        yield out
        if self.fail_with is not None:
            self.errored = self.dead_after_fail
            raise self.fail_with

    async def abort(self, request_id):
        self.aborted.append(request_id)

    def shutdown(self):
        self.shut_down = True


def engine_with(fake):
    engine = VLLMLocalEngine({"max_model_len": 2048}, "model", SimpleNamespace())
    engine._engine = fake  # what start() would have made (our adapter's own field)
    return engine


async def consume(engine):
    texts = []
    async for delta in engine.stream(LLMRequest("req-1", [], max_tokens=16, prompt_token_ids=[1, 2, 3])):
        texts.append(delta.text)
    return texts


async def test_a_dead_engine_core_fails_the_request_and_marks_the_engine_failed():
    from vllm.v1.engine.exceptions import EngineDeadError

    fake = FakeAsyncLLM(fail_with=EngineDeadError())
    engine = engine_with(fake)
    assert not engine.failed.is_set() and engine.failure is None
    with pytest.raises(EngineError, match="the vLLM engine died"):
        await consume(engine)
    assert engine.failed.is_set()
    assert isinstance(engine.failure, EngineError)
    assert "engine core process is gone (EngineDeadError during request req-1)" in str(engine.failure)
    assert fake.aborted == [], "nothing to abort on a dead engine"


async def test_an_ordinary_request_error_does_not_mark_the_engine_failed():
    fake = FakeAsyncLLM(fail_with=ValueError("bad sampling"), dead_after_fail=False)
    engine = engine_with(fake)
    with pytest.raises(EngineError, match="vLLM request failed: ValueError"):
        await consume(engine)
    assert not engine.failed.is_set() and engine.failure is None
    assert fake.aborted == ["req-1"], "the unfinished request is aborted"


async def test_the_watchdog_notices_a_death_between_requests(monkeypatch):
    monkeypatch.setattr(vllm_local, "WATCHDOG_INTERVAL_S", 0.02)
    fake = FakeAsyncLLM()
    engine = engine_with(fake)
    watchdog = asyncio.ensure_future(engine._watch())
    await asyncio.sleep(0.1)
    assert not engine.failed.is_set() and not watchdog.done()
    fake.errored = True  # the engine core process died while idle
    await asyncio.wait_for(engine.failed.wait(), 1.0)
    assert "engine core process is gone (noticed between requests)" in str(engine.failure)
    await asyncio.wait_for(watchdog, 1.0)  # it ends once it has reported


async def test_closing_stops_the_watchdog_and_is_no_failure(monkeypatch):
    monkeypatch.setattr(vllm_local, "WATCHDOG_INTERVAL_S", 0.02)
    fake = FakeAsyncLLM()
    engine = engine_with(fake)
    engine._watchdog = watchdog = asyncio.ensure_future(engine._watch())
    await asyncio.sleep(0.05)
    await engine.close()
    assert watchdog.cancelled() and fake.shut_down
    assert not engine.failed.is_set()


async def test_failure_is_recorded_once():
    engine = engine_with(FakeAsyncLLM())
    first, second = EngineError("first"), EngineError("second")
    engine.mark_failed(first)
    engine.mark_failed(second)
    assert engine.failure is first and engine.failed.is_set()
