"""The fleet's topology on one machine (issue #15): a vLLM OpenAI server on CPU (the run's shared one), one
PostgreSQL + pgvector server, two app replicas on the ``remote-vllm`` profile and HAProxy in front, all real
processes (app/fleet/). Shown: sessions through the load balancer land on both replicas and one engine batches
their requests; the knowledge base is shared; SIGTERM drains a replica (its turn finishes, its session closes
with 1001, new sessions go to the other). Every process the fleet starts, it stops."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import urllib.request

import pytest

from sub250.fleet import LocalFleet
from sub250.sdk import RealtimeClient
from sub250.sdk.client import ConnectionLost
from sub250.server import DRAIN_CLOSE_CODE
from tests.e2e.helpers import LLM_ANSWERS

pytestmark = pytest.mark.engines
KEY = "sk-sub250-fleet-test-0000000000"
QUESTION = "Tell me about the warranty of the Halden Aero and what it covers."
FACT_DOC = ("# Fleet drill\n\nThe Halden fleet drill passphrase is blue heron seven. The drill runs every first "
            "Monday of the month.\n")


@pytest.fixture(scope="module")
async def fleet(vllm_server, settings, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fleet")
    lines: list[str] = []
    async with LocalFleet(workdir, replicas=2, api_key=KEY, vllm_url=vllm_server, models_home=settings.models_dir,
                          drain_s=20, progress=lines.append) as running:
        print("\nFLEET " + "\nFLEET ".join(lines))
        yield running
    print("\nFLEET " + "\nFLEET ".join(lines[-6:]))


def replica_of(client: RealtimeClient) -> str:
    return client.ws.response.headers["X-Sub250-Replica"]


async def one_session_per_replica(fleet, tries: int = 8) -> dict[str, RealtimeClient]:
    """Sessions opened one at a time, each held open, until every replica has one (HAProxy's leastconn sends each
    new one to the replica with the fewest open: a connection of a test just ended may still count for a moment,
    CI saw two at once land on one replica). The extra sessions are closed; the map is replica -> session."""
    kept: dict[str, RealtimeClient] = {}
    extra: list[RealtimeClient] = []
    try:
        for _ in range(tries):
            client = RealtimeClient(fleet.ws_url, KEY)
            await client.connect()
            name = replica_of(client)
            if name in kept:
                extra.append(client)
            else:
                kept[name] = client
            if len(kept) == len(fleet.replicas):
                break
            await asyncio.sleep(0.2)
    except BaseException:
        extra.extend(kept.values())  # a connect failed: no session is left open behind the error
        raise
    finally:
        await asyncio.gather(*(c.close() for c in extra))
    return kept


def vllm_metric(url: str, name: str) -> float:
    """The sum of a vLLM Prometheus metric's samples (over its labels)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))


async def reply_text(client: RealtimeClient, timeout: float = 120) -> tuple[str, dict]:
    text = []
    while True:
        event = await client.next_event(timeout=timeout)
        if event.type == "response.output_text.delta":
            text.append(event.data["delta"])
        elif event.type == "response.done":
            return "".join(text), event.data["response"]


async def test_sessions_land_on_both_replicas_and_one_engine_batches_them(fleet, vllm_server):
    clients = [RealtimeClient(fleet.ws_url, KEY) for _ in range(4)]
    await asyncio.gather(*(c.connect() for c in clients))
    try:
        replicas = [replica_of(c) for c in clients]
        assert set(replicas) == {"replica-1", "replica-2"}, replicas
        for c in clients:
            await c.update_session(output_modalities=["text"], **LLM_ANSWERS)
        before = vllm_metric(vllm_server, "vllm:request_success_total")
        running: list[float] = []

        async def sample() -> None:
            while True:
                running.append(await asyncio.to_thread(vllm_metric, vllm_server, "vllm:num_requests_running"))
                await asyncio.sleep(0.02)

        sampler = asyncio.ensure_future(sample())
        await asyncio.gather(*(c.send_text(QUESTION) for c in clients))
        turns = await asyncio.gather(*(c.collect_turn(timeout=120) for c in clients))
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        for turn in turns:
            assert turn.status == "completed" and turn.reply.strip(), turn.errors
            assert turn.latency is not None and turn.latency.tokens > 0  # generated, not a fixed text
        # vLLM counts a request in request_success only when it ends by itself (stop, length): a reply the
        # server ended at a phrase said twice (stop_loops, app/answer/answerer.py) closed its stream, which vLLM
        # counts as an abort, in no counter. Each reply is one or the other.
        looped = sum(bool((t.latency.raw.get("answer") or {}).get("stopped_loop")) for t in turns)
        served = vllm_metric(vllm_server, "vllm:request_success_total") - before
        print(f"\nFLEET 4 sessions: replicas {replicas}; vLLM served {served:.0f} requests to their end, "
              f"{looped} replies stopped at a loop, at most {max(running):.0f} running at once "
              f"({len(running)} samples)")
        assert served + looped >= 4  # every reply came from the one engine
        assert max(running) >= 2, "the engine never ran two replicas' requests together"
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_the_knowledge_base_is_shared(fleet, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "fleet-drill.md").write_text(FACT_DOC)
    await fleet.ingest(kb)  # `python -m sub250 ingest` against the fleet's one database
    opened = await one_session_per_replica(fleet)
    clients = list(opened.values())
    try:
        assert set(opened) == {"replica-1", "replica-2"}
        for c in clients:
            await c.update_session(output_modalities=["text"])
            await c.send_text("What is the fleet drill passphrase?")
        for c in clients:
            text, response = await reply_text(c)
            assert response["status"] == "completed"
            assert "heron" in text.lower(), f"{replica_of(c)} answered {text!r}"
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_sigterm_drains_a_replica_while_new_sessions_go_to_the_other(fleet):
    busy = RealtimeClient(fleet.ws_url, KEY)
    await busy.connect()
    try:
        name = replica_of(busy)
        other = next(r.name for r in fleet.replicas if r.name != name)
        await busy.update_session(output_modalities=["text"], **LLM_ANSWERS)
        await busy.send_text(QUESTION)
        await busy.wait_for("response.output_text.delta", timeout=60)
        replica = fleet.replica(name)
        t_term = time.monotonic()
        replica.child.send_signal(signal.SIGTERM)  # mid-reply

        # a newcomer right away: HAProxy retries a 503 from the draining replica on the other one
        newcomer = RealtimeClient(fleet.ws_url, KEY)
        await newcomer.connect()
        assert replica_of(newcomer) == other
        await newcomer.update_session(output_modalities=["text"])
        await newcomer.send_text("How long does the filter last?")
        _, response = await reply_text(newcomer)
        assert response["status"] == "completed"

        # HAProxy takes the draining replica out within a check or two
        took_down = await fleet.wait_states({name: "DOWN", other: "UP"}, timeout_s=10)

        # the turn in flight finishes, then its session is closed with 1001
        seen = []
        with pytest.raises(ConnectionLost):
            while True:
                seen.append(await busy.next_event(timeout=30))
        t_closed = time.monotonic()
        done = [e for e in seen if e.type == "response.done"]
        assert done and done[0].data["response"]["status"] == "completed", [e.type for e in seen]
        assert busy.ws.close_code == DRAIN_CLOSE_CODE
        code = await asyncio.wait_for(replica.child.proc.wait(), 60)
        t_exit = time.monotonic()
        assert code == 0, replica.child.tail()
        assert "drained in" in replica.child.tail(), replica.child.tail()
        print(f"\nFLEET SIGTERM to {name} mid-reply: HAProxy had it DOWN after {took_down * 1000:.0f} ms of polling, "
              f"its turn completed and the session closed ({busy.ws.close_code}) {t_closed - t_term:.1f} s after the "
              f"signal, the process exited ({code}) after {t_exit - t_term:.1f} s; a newcomer was served by {other}")
        await newcomer.close()
    finally:
        await busy.close()
    # the readiness of the survivor is unchanged
    with urllib.request.urlopen(f"{fleet.replica(other).url}/readyz", timeout=5) as resp:
        assert resp.status == 200 and json.loads(resp.read())["replica"] == other
