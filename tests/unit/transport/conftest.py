"""Transport tests run a real server (aiohttp, real sockets) with a stand-in for the session, so no engines
are loaded: ``FakeSession`` follows the session contract (start, handle, handle_audio, error, close)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sub250.gateway import ApiKeys, GatewayLimits
from sub250.protocol import error_event, server_event
from sub250.protocol.session_config import SessionConfig
from sub250.server import Server
from sub250.transport import dispatch

TEST_KEY = "sk-sub250-unit-000000000000"


class FakeSession:
    """Records what the transport hands it. ``response.create`` with ``response.metadata`` makes it talk
    back: ``audio_chunks``/``chunk_bytes``/``response_id`` (``send_audio``), ``events``/``pad`` (``send``)."""

    def __init__(self, shared: Any, transport: Any, model: str | None = None) -> None:
        self.shared, self.transport, self.model = shared, transport, model
        self.events: list[tuple[Any, int]] = []
        self.audio: list[tuple[bytes, int, int]] = []
        self.errors: list[Any] = []
        self.digits: list[str] = []
        self.started = self.closed = False
        self.block: asyncio.Event | None = None  # set it: handle() waits on it (a busy session)
        self.configured: list[Any] = []
        self.in_flight = False  # a turn under way (a draining server waits for it)
        self.config = SessionConfig(id="sess_fake")  # what session.created says, as the real session's

    def input_seconds(self, nbytes: int) -> float:
        return nbytes / 2 / 24_000

    def configure(self, session: Any, event_id: str | None = None) -> None:
        if session.get("instructions") == 5:  # stands for a field the real session refuses
            from sub250.protocol import ProtocolError

            raise ProtocolError("invalid_value", "'instructions' must be a string", param="session.instructions")
        self.configured.append(session)

    def start(self) -> None:
        self.started = True
        self.transport.send(server_event("session.created", session={"type": "realtime", "model": self.model}))

    async def handle(self, event: Any, received_ns: int) -> None:
        self.events.append((event, received_ns))
        if self.block is not None:
            await self.block.wait()
        meta = (event.data.get("response") or {}).get("metadata") or {} if event.type == "response.create" else {}
        for i in range(int(meta.get("audio_chunks", 0))):
            self.transport.send_audio(bytes([i % 256]) * int(meta.get("chunk_bytes", 4800)),
                                      response_id=meta.get("response_id", "resp_1"), item_id="item_1")
        for i in range(int(meta.get("events", 0))):
            self.transport.send(server_event("sub250.test", n=i, pad="x" * int(meta.get("pad", 0))))

    async def handle_audio(self, pcm16: bytes, rate: int, received_ns: int) -> None:
        self.audio.append((pcm16, rate, received_ns))

    def dtmf(self, digit: str, received_ns: int) -> None:
        self.digits.append(digit)

    def error(self, err: Any) -> None:
        self.errors.append(err)
        self.transport.send(error_event(err))

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def sessions(monkeypatch) -> list[FakeSession]:
    """Every session the transports create during the test, in order."""
    made: list[FakeSession] = []

    def new_session(shared: Any, transport: Any, model: str | None) -> FakeSession:
        made.append(FakeSession(shared, transport, model))
        return made[-1]

    monkeypatch.setattr(dispatch, "new_session", new_session)
    return made


@pytest.fixture
async def make_server(sessions):
    """``await make_server(ready=True, host="127.0.0.1", **GatewayLimits fields)``: a listening Server."""
    servers: list[Server] = []

    async def make(ready: bool = True, host: str = "127.0.0.1", replica: str = "", **limits: Any) -> Server:
        limits.setdefault("origins", ("http://allowed.example",))
        srv = Server(host, 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(**limits), replica=replica)
        await srv.listen()
        if ready:
            srv.state, srv.shared = "ready", object()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        await srv.close()
