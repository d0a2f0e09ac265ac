"""Draining (SIGTERM in ``serve``): readiness fails at once, newcomers are refused, each connection closes with
1001 as soon as nothing of it is in flight, and whatever is still busy at the deadline is closed then."""

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sub250.server import DRAIN_CLOSE_CODE

from .test_front_door import AUTH, head_and_body, raw

URL = "ws://127.0.0.1:{}/v1/realtime"


async def get(port: int, path: str) -> tuple[bytes, dict]:
    return head_and_body(await raw(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()))


async def closed_with(ws, within: float) -> tuple[int | None, float]:
    """Read until the server closes; (close code, seconds it took)."""
    t0 = asyncio.get_running_loop().time()
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), within)
    return ws.close_code, asyncio.get_running_loop().time() - t0


async def opened(port: int):
    ws = await connect(URL.format(port), additional_headers=AUTH)
    assert json.loads(await ws.recv())["type"] == "session.created"
    return ws


async def test_liveness_and_readiness_by_state(make_server):
    srv = await make_server(replica="replica-a")
    for state, healthz, readyz in (("ready", 200, 200), ("draining", 200, 503), ("failed", 503, 503)):
        srv.state = state
        head, body = await get(srv.port, "/healthz")
        assert head.startswith(f"HTTP/1.1 {healthz}".encode()) and body["status"] == state
        assert body["replica"] == "replica-a" and b"X-Sub250-Replica: replica-a" in head
        head, body = await get(srv.port, "/readyz")
        assert head.startswith(f"HTTP/1.1 {readyz}".encode()) and body["status"] == state


async def test_drain_closes_idle_sessions_at_once_and_busy_ones_after_their_turn(make_server, sessions):
    srv = await make_server()
    idle, busy = await opened(srv.port), await opened(srv.port)
    sessions[1].in_flight = True
    drain = asyncio.ensure_future(srv.drain(10.0))
    code, took = await closed_with(idle, 5)
    assert code == DRAIN_CLOSE_CODE and idle.close_reason == "server shutting down" and took < 2
    head, body = await get(srv.port, "/readyz")
    assert head.startswith(b"HTTP/1.1 503") and body["status"] == "draining"
    with pytest.raises(InvalidStatus) as refused:  # a newcomer: 503, go elsewhere
        await connect(URL.format(srv.port), additional_headers=AUTH)
    assert refused.value.response.status_code == 503
    assert "shutting down" in json.loads(refused.value.response.body)["error"]["message"]
    await busy.send(json.dumps({"type": "response.create"}))  # the busy session still works meanwhile
    await asyncio.sleep(0.3)
    assert not drain.done() and busy.close_code is None and sessions[1].events[-1][0].type == "response.create"
    sessions[1].in_flight = False  # its turn ends
    code, _ = await closed_with(busy, 5)
    assert code == DRAIN_CLOSE_CODE
    report = await asyncio.wait_for(drain, 5)
    assert (report.closed_idle, report.cut_short) == (2, 0) and report.seconds < 5


async def test_drain_cuts_a_turn_that_outlasts_the_bound(make_server, sessions):
    srv = await make_server()
    ws = await opened(srv.port)
    sessions[0].in_flight = True
    report = await asyncio.wait_for(srv.drain(0.4), 5)
    code, _ = await closed_with(ws, 5)
    assert code == DRAIN_CLOSE_CODE and (report.closed_idle, report.cut_short) == (0, 1)
    assert 0.4 <= report.seconds < 3


async def test_a_second_signal_cuts_the_drain_short(make_server, sessions):
    srv = await make_server()
    ws = await opened(srv.port)
    sessions[0].in_flight = True
    hurry = asyncio.Event()
    drain = asyncio.ensure_future(srv.drain(30.0, hurry))
    await asyncio.sleep(0.2)
    hurry.set()
    report = await asyncio.wait_for(drain, 5)
    assert report.cut_short == 1 and report.seconds < 3
    code, _ = await closed_with(ws, 5)
    assert code == DRAIN_CLOSE_CODE


async def test_a_server_still_loading_stays_unready_after_the_signal(make_server):
    srv = await make_server(ready=False)
    srv.stop_accepting()
    srv.attach(object())  # the engines finished loading after the SIGTERM
    assert srv.state == "draining" and not srv.ready and srv.live


class _Connection:
    def __init__(self, *, idle: bool, closing: bool = False) -> None:
        self.idle, self.closing, self.closes = idle, closing, []

    def close_soon(self, *args) -> None:
        self.closes.append(args)
        self.closing = True


def test_each_connection_is_closed_and_counted_once():
    from types import SimpleNamespace

    from aiohttp import web

    from sub250.transport import http

    app = web.Application()
    already, idle, busy = _Connection(idle=True, closing=True), _Connection(idle=True), _Connection(idle=False)
    call = _Connection(idle=True)
    app[http.SOCKETS] = {already, idle, busy}
    app[http.BACKEND] = SimpleNamespace(calls={"rtc_1": call})
    assert http.close_idle_connections(app, DRAIN_CLOSE_CODE, "bye") == (2, 1)
    assert already.closes == [] and idle.closes == [(DRAIN_CLOSE_CODE, "bye")] and call.closes == [("bye",)]
    assert http.close_idle_connections(app, DRAIN_CLOSE_CODE, "bye") == (0, 1)  # the next look: only the busy one
