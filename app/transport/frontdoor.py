"""One port for both protocols: WebSocket upgrades go to ``websockets``, every other HTTP request to
``aiohttp``.

``websockets`` is the WebSocket server (its sans-I/O core, ping/pong RTT, close codes) but it cannot read
a request body, and WebRTC signalling is an HTTP POST with an SDP body (``/v1/realtime/calls``, as in the
OpenAI Realtime API). Rather than a second port, each accepted connection is held until its request
head is complete, then handed to the right library: the ``websockets`` connection is this class itself
(its documented ``create_connection`` hook), the ``aiohttp`` one is a protocol from ``web.Server`` that
takes over the transport. Nothing is copied after the hand-over; the head is replayed once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection

#: A request head larger than this is refused (431) before either library sees it.
MAX_HEAD_BYTES = 16 * 1024
#: A client that has not sent its request head by then is dropped.
HEAD_TIMEOUT_S = 10.0
_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket[ \t]*\r\n", re.IGNORECASE)


def split_connection(http_factory: Callable[[], asyncio.Protocol]) -> type[ServerConnection]:
    """A ``ServerConnection`` class for ``websockets.serve(create_connection=...)`` that hands
    non-WebSocket requests to ``http_factory()`` (an ``aiohttp.web.Server``)."""

    class SplitConnection(ServerConnection):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._head: bytearray | None = bytearray()
            self._raw_transport = transport
            self._head_timer = asyncio.get_running_loop().call_later(HEAD_TIMEOUT_S, transport.abort)

        def data_received(self, data: bytes) -> None:
            if self._head is None:
                super().data_received(data)
                return
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                if len(self._head) > MAX_HEAD_BYTES:
                    self._refuse(b"431 Request Header Fields Too Large")
                return
            head, self._head = bytes(self._head), None
            self._head_timer.cancel()
            transport = self._raw_transport
            if _UPGRADE.search(head, 0, end + 2):
                super().connection_made(transport)
                super().data_received(head)
                return
            http = http_factory()
            transport.set_protocol(http)  # type: ignore[attr-defined]
            http.connection_made(transport)
            http.data_received(head)

        def _refuse(self, status: bytes) -> None:
            self._head = None
            self._head_timer.cancel()
            self._raw_transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self._raw_transport.close()  # type: ignore[attr-defined]

        def eof_received(self) -> Any:
            if getattr(self, "_head", None) is not None or not hasattr(self, "recv_messages"):
                self._head = None
                self._head_timer.cancel()
                return False  # close: the client gave up before its request was complete
            return super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if getattr(self, "_head", None) is not None or not hasattr(self, "recv_messages"):
                self._head_timer.cancel()
                return  # never became a WebSocket: websockets has nothing to clean up
            super().connection_lost(exc)

    return SplitConnection
