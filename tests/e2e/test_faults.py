"""Faults survived (issue #11): PostgreSQL stopped and started under a session, an exception inside ASR or TTS,
a client that vanishes mid-reply - all on the shared real server - and the LLM engine's core process killed, in
a server process of its own (it must exit for its supervisor; the shared engine must live on)."""

from __future__ import annotations

import asyncio
import ctypes.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from scripts.bench import lab
from sub250.sdk import RealtimeClient
from sub250.sdk.client import ConnectionLost
from tests.e2e.helpers import LLM_ANSWERS

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
REPO = Path(__file__).resolve().parents[2]
#: Injected into the exceptions: it must never reach a client.
SECRET = "injected fault /secret/path 0xdeadbeef"
QUESTION = "How much is the yearly Care+ membership?"
LONG_QUESTION = "Tell me everything about the warranty, the returns, the filters and the delivery, in detail."


def http_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def assert_no_secret(result) -> None:
    wire = json.dumps([e.data for e in result.events])
    assert SECRET not in wire and "RuntimeError" not in wire, "no exception text reaches the client"


async def spoken_turn(client: RealtimeClient, wav: Path):
    sender = asyncio.ensure_future(client.send_wav(str(wav), realtime=True))
    try:
        return await client.collect_turn(timeout=120)
    finally:
        await sender


# --- PostgreSQL stopped mid-session -------------------------------------------------------------------


async def test_postgres_stopped_mid_session_costs_the_context_then_retrieval_comes_back(ws_url, stack):
    pg = stack.pg
    assert pg is not None, "the test stack runs the embedded PostgreSQL"
    dsn = stack.dsn
    cache = stack.retriever.cache
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        await client.update_session(output_modalities=["text"], max_output_tokens=24)
        if cache is not None:
            cache.clear()  # a cached answer would need no database at all
        await asyncio.to_thread(pg.stop)  # the real server process (pg_ctl stop), not only the pool
        try:
            assert not pg.is_running(), "PostgreSQL did not stop"
            await client.send_text(QUESTION)
            dead = await client.collect_turn(timeout=90)
        finally:
            restarted = await asyncio.to_thread(pg.start)  # the same data directory
        assert [e.error_code for e in dead.errors] == ["retrieval_unavailable"]
        assert dead.status == "completed" and dead.reply.strip() and dead.sources == []
        retrieval_ms = dead.latency.spans["retrieval"]
        print(f"\nFAULTS retrieval against a stopped PostgreSQL: {retrieval_ms:.1f} ms")
        assert retrieval_ms < 2500, "a dead database must fail fast (the store's bound is 2 s)"

        assert restarted == dsn, "the embedded server's address (its unix socket) is the same after a restart"
        if cache is not None:
            cache.clear()
        await client.send_text(QUESTION)  # the same session, the same app: no restart of anything
        back = await client.collect_turn(timeout=90)
        assert back.errors == [] and back.status == "completed"
        assert back.sources, "retrieval works again"
        print(f"FAULTS retrieval after PostgreSQL came back: {back.latency.spans['retrieval']:.1f} ms")
    assert pg.is_running() and await stack.store.count() > 0  # restored for the tests after this one


# --- an exception inside ASR or TTS -------------------------------------------------------------------


async def test_an_asr_exception_fails_the_spoken_turn_and_the_next_one_completes(ws_url, stack, speak, monkeypatch):
    wav = speak("How often do I need to buy a new filter?")
    real = stack.asr.transcribe
    raised = []

    def transcribe(audio, *, window=None, prompt=None, final=False):
        if final and not raised:  # the turn's final transcript
            raised.append(time.monotonic())
            raise RuntimeError(SECRET)
        return real(audio, window=window, prompt=prompt, final=final)

    monkeypatch.setattr(stack.asr, "transcribe", transcribe)  # the real engine around it stays as it is
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        await client.update_session(output_modalities=["text"], max_output_tokens=24,
                                    sub250={"speculative_turns": False})
        failed = await spoken_turn(client, wav)
        assert raised, "the final transcription never ran"
        assert failed.status == "failed"
        assert [e.error_code for e in failed.errors] == ["response_failed"]
        assert "error id" in failed.errors[0].data["error"]["message"]
        assert_no_secret(failed)
        again = await spoken_turn(client, wav)
        assert again.status == "completed" and again.errors == []
        assert "filter" in again.transcript.lower() and again.reply.strip()


async def test_a_tts_exception_fails_the_reply_and_the_next_one_completes(ws_url, stack, monkeypatch):
    real = stack.tts.synthesize
    raised = []

    def synthesize(text):  # on the TTS engine's thread
        if not raised:
            raised.append(text)
            raise RuntimeError(SECRET)
        return real(text)

    monkeypatch.setattr(stack.tts, "synthesize", synthesize)
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        await client.update_session(output_modalities=["audio"], max_output_tokens=24)
        await client.send_text(QUESTION)
        failed = await client.collect_turn(timeout=90)
        assert raised, "the synthesis never ran"
        assert failed.status == "failed"
        assert [e.error_code for e in failed.errors] == ["response_failed"]
        assert_no_secret(failed)
        assert failed.audio_seconds == 0
        await client.send_text(QUESTION)
        again = await client.collect_turn(timeout=90)
        assert again.status == "completed" and again.errors == [] and again.audio_seconds > 0


# --- a client that vanishes mid-reply -----------------------------------------------------------------


class RawClient:
    """A WebSocket client on a bare TCP stream (``websockets``' sans-I/O protocol), so the test can drop the
    connection the way a dead network does: the TCP transport aborted, no close handshake."""

    def __init__(self, url: str, key: str) -> None:
        from websockets.client import ClientProtocol
        from websockets.uri import parse_uri

        self.uri = parse_uri(url)
        self.protocol = ClientProtocol(self.uri)
        self.key = key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pending: list = []

    async def open(self) -> dict:
        from websockets.http11 import Response

        self.reader, self.writer = await asyncio.open_connection(self.uri.host, self.uri.port)
        request = self.protocol.connect()
        request.headers["Authorization"] = f"Bearer {self.key}"
        self.protocol.send_request(request)
        self._flush()
        response = None
        while response is None:
            events = await asyncio.wait_for(self._receive(), 10)
            for i, event in enumerate(events):
                if isinstance(event, Response):
                    response, self.pending = event, events[i + 1:]
        assert response.status_code == 101, response
        created = await self.next_event(timeout=10)
        assert created["type"] == "session.created", created
        return created

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.writer.write(data)

    async def _receive(self) -> list:
        data = await self.reader.read(65536)
        if not data:
            self.protocol.receive_eof()
        else:
            self.protocol.receive_data(data)
        self._flush()  # answers to PINGs
        return self.protocol.events_received()

    async def send(self, event: dict) -> None:
        self.protocol.send_text(json.dumps(event).encode())
        self._flush()
        await self.writer.drain()

    async def next_event(self, timeout: float) -> dict:
        from websockets.frames import Opcode

        async def one() -> dict:
            while True:
                while self.pending:
                    frame = self.pending.pop(0)
                    if frame.opcode is Opcode.TEXT:
                        return json.loads(frame.data)
                self.pending.extend(await self._receive())

        return await asyncio.wait_for(one(), timeout)

    def abort(self) -> None:
        self.writer.transport.abort()


def session_gauges(port: int) -> dict[str, float]:
    """Every gauge sample of the server's /metrics whose name speaks of sessions (none, if it has no such)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {f"{s.name}{sorted(s.labels.items())}": s.value for fam in text_string_to_metric_families(text)
            if fam.type == "gauge" and "session" in fam.name for s in fam.samples}


async def test_a_client_that_vanishes_mid_reply_leaves_nothing_running(ws_url, server, stack, monkeypatch):
    engine = stack.llm._engine  # vLLM's AsyncLLM (as test_barge_in.py reads it)
    real = stack.tts.synthesize
    syntheses: list[float] = []
    lock = threading.Lock()

    def synthesize(text):
        with lock:
            syntheses.append(time.monotonic())
        return real(text)

    monkeypatch.setattr(stack.tts, "synthesize", synthesize)
    assert engine.get_num_unfinished_requests() == 0
    await asyncio.sleep(0.2)  # let earlier tests' stragglers go
    baseline_tasks = len(asyncio.all_tasks())
    baseline_gauges = await asyncio.to_thread(session_gauges, server.port)

    client = RawClient(ws_url, TEST_KEY)
    await client.open()
    await client.send({"type": "session.update", "session": {"type": "realtime", "max_output_tokens": "inf",
                                                              **LLM_ANSWERS}})
    await client.send({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": LONG_QUESTION}]}})
    await client.send({"type": "response.create"})
    audio = 0
    while audio < 1:  # the reply is streaming, its speech too
        ev = await client.next_event(timeout=60)
        assert ev["type"] not in ("response.done", "error"), ev
        audio += ev["type"] == "response.output_audio.delta"
    assert engine.get_num_unfinished_requests() >= 1, "the reply must still be generating when the client goes"
    assert syntheses, "the reply's speech has started"
    live = await asyncio.to_thread(session_gauges, server.port)
    if baseline_gauges:  # the server has a sessions gauge: it counted this one
        assert sum(live.values()) == sum(baseline_gauges.values()) + 1, live
    client.abort()
    t_abort = time.monotonic()

    ended: dict[str, float] = {}
    deadline = t_abort + 10
    while time.monotonic() < deadline and len(ended) < 2:
        if "engine" not in ended and engine.get_num_unfinished_requests() == 0:
            ended["engine"] = time.monotonic() - t_abort
        if "tasks" not in ended and len(asyncio.all_tasks()) <= baseline_tasks:
            ended["tasks"] = time.monotonic() - t_abort
        await asyncio.sleep(0.01)
    extra = [t for t in asyncio.all_tasks() if not t.done()]
    assert "engine" in ended, f"the engine still has {engine.get_num_unfinished_requests()} unfinished requests"
    assert "tasks" in ended, (f"{len(asyncio.all_tasks())} tasks, {baseline_tasks} before the session: "
                              f"{[t.get_coro() for t in extra]}")
    gauges = await asyncio.to_thread(session_gauges, server.port)
    assert gauges == baseline_gauges, f"session gauges {gauges}, before the session {baseline_gauges}"
    with lock:
        count, last = len(syntheses), syntheses[-1] if syntheses else None
    await asyncio.sleep(1.5)
    with lock:
        assert len(syntheses) == count, "speech was still being synthesized after the session ended"
    all_ended = max(ended.values())
    print(f"\nFAULTS client gone mid-reply: engine idle after {ended['engine'] * 1000:.0f} ms, session tasks gone after "
          f"{ended['tasks'] * 1000:.0f} ms; {count} syntheses, the last "
          f"{'none' if last is None else f'{(last - t_abort) * 1000:.0f} ms'} from the abort; session gauges "
          f"{baseline_gauges or 'none on /metrics'}")
    assert all_ended < 5.0


# --- the LLM engine's core process killed (a server process of its own) -------------------------------


def engine_core_of(pid: int) -> psutil.Process:
    """vLLM's engine core: the server's child process titled ``VLLM::EngineCore``."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline()) + " " + child.name()
        except psutil.NoSuchProcess:
            continue
        if "EngineCore" in title or "EngineCor" in child.name():
            found.append(child)
    assert len(found) == 1, f"engine core processes among the server's children: {found}"
    return found[0]


async def wait_ready(proc: subprocess.Popen, out_path: Path, logs) -> int:
    """The port of a ``serve`` process once it says it is ready (its loop is busy while vLLM loads: no polling)."""
    deadline = time.monotonic() + 300
    while "ready in" not in out_path.read_text():
        assert proc.poll() is None, f"serve exited early ({proc.returncode}):\n{logs()}"
        assert time.monotonic() < deadline, f"serve not ready after 300 s:\n{logs()}"
        await asyncio.sleep(0.5)
    port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", out_path.read_text()).group(1))
    status, body = await asyncio.to_thread(http_json, f"http://127.0.0.1:{port}/healthz")
    assert status == 200
    # `serve` restarts itself under jemalloc when the library is installed (.ci/run installs it), same PID
    assert body["allocator"] == ("jemalloc" if ctypes.util.find_library("jemalloc") else "glibc"), body
    return port


async def expect_failed_turn(client: RealtimeClient) -> float:
    """The turn in flight ends: one generic ``error``, then ``response.done`` failed. Returns when the error came."""
    error = await client.wait_for("error", "response.done", timeout=30)
    t_error = time.monotonic()
    assert error.type == "error", f"response.done came before any error: {error.data}"
    assert error.error_code == "response_failed" and "error id" in error.data["error"]["message"]
    done = await client.wait_for("response.done", timeout=10)
    assert done.data["response"]["status"] == "failed"
    assert done.data["response"]["status_details"]["error"]["code"] == "response_failed"
    return t_error


@pytest.mark.parametrize("when", ["mid-turn", "idle"])
async def test_a_killed_llm_engine_fails_the_turn_turns_unhealthy_and_exits_for_the_supervisor(when, stack, settings,
                                                                                            tmp_path):
    """``mid-turn``: the reply in flight notices (vLLM's EngineDeadError); ``idle``: the watchdog does, and a turn
    asked for during the drain fails at once."""
    from sub250.cli import EXIT_ENGINE_FAILED, FAILURE_CLOSE_CODE

    env = {**os.environ, "SUB250_HOME": str(tmp_path / "home"), "SUB250_MODELS_HOME": str(settings.models_dir),
           "DATABASE_URL": stack.dsn,  # the test PostgreSQL: no second embedded one
           "SUB250_PROFILE": lab.profile("cpu-tiny"), "SUB250_LLM_ENFORCE_EAGER": "true", "SUB250_DB_POOL_SIZE": "2",
           "PYTHONUNBUFFERED": "1"}
    env.pop("SUB250_DATABASE_URL", None)
    out_path, err_path = tmp_path / "serve.out", tmp_path / "serve.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "sub250", "serve", "--host", "127.0.0.1", "--port", "0",
                                 "--dev-no-auth"], cwd=REPO, env=env, stdout=out, stderr=err)

    def logs() -> str:
        return f"--- stdout\n{out_path.read_text()[-3000:]}\n--- stderr\n{err_path.read_text()[-6000:]}"

    family: list[psutil.Process] = []
    try:
        port = await wait_ready(proc, out_path, logs)
        url, health = f"ws://127.0.0.1:{port}/v1/realtime", f"http://127.0.0.1:{port}/healthz"
        async with RealtimeClient(url, None) as client:
            await client.update_session(output_modalities=["text"], max_output_tokens="inf",
                                        **LLM_ANSWERS)
            if when == "mid-turn":
                await client.send_text(LONG_QUESTION)
                await client.wait_for("response.output_text.delta", timeout=90)
            core = engine_core_of(proc.pid)
            family = psutil.Process(proc.pid).children(recursive=True)  # the core and its workers
            core.send_signal(signal.SIGKILL)
            t_kill = time.monotonic()
            if when == "mid-turn":
                t_error = await expect_failed_turn(client)

            # unhealthy (at once mid-turn; within the watchdog's second when idle), closed to newcomers
            while True:
                status, body = await asyncio.to_thread(http_json, health)
                if status == 503 or time.monotonic() - t_kill > 5:
                    break
                await asyncio.sleep(0.05)
            t_unhealthy = time.monotonic()
            assert status == 503 and (body["status"], body["reason"]) == ("failed", "the LLM engine died"), body
            with pytest.raises(InvalidStatus) as refused:
                async with connect(url):
                    pass
            assert refused.value.response.status_code == 503
            assert json.loads(refused.value.response.body)["error"]["code"] == "not_ready"
            if when == "idle":  # a turn asked for during the drain fails at once, it does not hang
                await client.send_text(QUESTION)
                t_error = await expect_failed_turn(client)

            # then the open session is closed: 1012, service restart
            with pytest.raises(ConnectionLost):
                while True:
                    await client.next_event(timeout=15)
            t_closed = time.monotonic()
            assert client.ws.close_code == FAILURE_CLOSE_CODE

        code = await asyncio.to_thread(proc.wait, 30)
        t_exit = time.monotonic()
        assert code == EXIT_ENGINE_FAILED, logs()
        stderr = err_path.read_text()
        assert re.search(r"the LLM engine died: .+; exiting for the supervisor to restart sub250", stderr), logs()
        print(f"\nFAULTS engine core killed {when}: error after {(t_error - t_kill) * 1000:.0f} ms, /healthz 503 seen "
              f"after {(t_unhealthy - t_kill) * 1000:.0f} ms, session closed ({FAILURE_CLOSE_CODE}) after "
              f"{(t_closed - t_kill) * 1000:.0f} ms, process exited ({code}) after {(t_exit - t_kill) * 1000:.0f} ms")
        assert t_exit - t_kill < 20
        _, alive = await asyncio.to_thread(psutil.wait_procs, family, 10)
        assert not alive, f"engine processes left running after the server exited: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for child in family:
            if child.is_running():
                child.kill()
