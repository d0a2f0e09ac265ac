"""A client that talks and never listens: one realtime session that streams speech at real-time pace and
never reads its socket, so that the server's replies pile up (``scripts/slow_client.py``, the e2e test).

It is a ``websockets`` client whose flow control stops reading: with ``max_queue=1`` the library pauses
the transport (``transport.pause_reading()``) as soon as more than one received frame waits to be read
(websockets/asyncio/messages.py ``Assembler.maybe_pause``), and nothing here reads them. What a server
can still push is then bounded by the kernel: this socket's receive buffer is set small (``rcvbuf``:
setting ``SO_RCVBUF`` also turns off its autotuning, which on loopback may grow to ``tcp_rmem``'s maximum,
32 MiB here) and the server's send buffer (on loopback Linux autotunes it up to ``tcp_wmem``'s maximum,
4 MiB, whatever the receiver's window). The client's own keepalive is off: it could not read the PONGs.

Once the server has closed the connection, :meth:`NeverReadingClient.drain` reads what is left and
reports the close code the client gets. It only gets the server's close frame if nothing reset the
connection first: a server that closes its socket with client data still unread sends a TCP RST, and the
client then loses the rest of the stream (close code 1006).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import socket
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from scripts.bench.corpus import Utterance
from scripts.bench.probe import socket_address

RATE = 24_000
CHUNK_MS = 20


def load_pcm24(path: Path) -> bytes:
    """A sound file as PCM16 mono at 24 kHz (as ``RealtimeClient.send_wav`` sends it)."""
    import numpy as np
    import soundfile as sf

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    mono = data.mean(axis=1)
    if rate != RATE:
        import soxr

        mono = soxr.resample(mono, rate, RATE)
    return (np.clip(mono, -1, 1) * 32767).astype("<i2").tobytes()


def speech_frames(utts: list[Utterance], *, gap_s: float, chunk_ms: int = CHUNK_MS) -> Iterator[bytes]:
    """Endless ``chunk_ms`` frames: each utterance in turn, then ``gap_s`` of silence (so that server VAD
    ends the turn and the reply has time to be made before the next question: a live reply would be
    cancelled by the next one, barge-in, and its queued events purged)."""
    step = RATE * chunk_ms // 1000 * 2
    cache: dict[Path, bytes] = {}
    silence = [bytes(step)] * max(1, int(gap_s * 1000 / chunk_ms))
    for utt in itertools.cycle(utts):
        pcm = cache.setdefault(utt.path, load_pcm24(utt.path))
        yield from (pcm[i:i + step].ljust(step, b"\0") for i in range(0, len(pcm), step))
        yield from silence


class NeverReadingClient:
    """``await connect()``, ``await stream(frames, stop)`` (real-time pace), ``await drain(timeout)``, ``close()``."""

    def __init__(self, url: str, key: str | None, *, rcvbuf: int = 64 * 1024, send_timeout_s: float = 5.0) -> None:
        self.url, self.key = url, key
        self.rcvbuf = rcvbuf
        self.send_timeout_s = send_timeout_s
        self.ws: Any = None
        self.connected_at: float | None = None  # time.monotonic()
        self.audio_sent_s = 0.0
        #: Why streaming ended: "stopped" (asked to), "send_stalled" (the server stopped reading: a send
        #: did not complete within send_timeout_s), "closed" (the connection is gone), "frames_exhausted".
        self.stream_end: str | None = None
        self.stream_error: str | None = None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        family, addr = socket_address(self.url)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)  # before connect: the window
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, addr)
            headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
            self.ws = await connect(self.url, sock=sock, additional_headers=headers, max_queue=1, ping_interval=None,
                                    max_size=None, compression=None, close_timeout=2)
        except BaseException:
            sock.close()
            raise
        self.connected_at = time.monotonic()

    async def stream(self, frames: Iterable[bytes], stop: asyncio.Event, *, chunk_ms: int = CHUNK_MS) -> str:
        """Send ``frames`` as ``input_audio_buffer.append`` at real-time pace until ``stop`` is set; returns
        :attr:`stream_end`."""
        from websockets.exceptions import ConnectionClosed

        t0 = time.perf_counter()
        for i, frame in enumerate(frames):
            if stop.is_set():
                self.stream_end = "stopped"
                return self.stream_end
            event = json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(frame).decode()})
            try:
                await asyncio.wait_for(self.ws.send(event), self.send_timeout_s)
            except TimeoutError:
                self.stream_end = "send_stalled"
                self.stream_error = f"a send did not complete within {self.send_timeout_s:.0f} s"
                return self.stream_end
            except ConnectionClosed as exc:
                self.stream_end, self.stream_error = "closed", str(exc)
                return self.stream_end
            self.audio_sent_s += len(frame) / 2 / RATE
            delay = t0 + (i + 1) * chunk_ms / 1000 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        self.stream_end = "frames_exhausted"
        return self.stream_end

    async def drain(self, timeout_s: float) -> dict[str, Any]:
        """Read everything the server sent until the connection ends (or ``timeout_s``): counts by event type
        and the close code and reason the client got (``None`` if it did not end in time)."""
        from websockets.exceptions import ConnectionClosed

        types: Counter[str] = Counter()
        received = 0
        ended = False
        deadline = time.monotonic() + timeout_s
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    raw = await asyncio.wait_for(self.ws.recv(), left)
                except TimeoutError:
                    break
                received += len(raw)
                types[json.loads(raw).get("type", "?")] += 1
        except ConnectionClosed:
            ended = True
        code = self.ws.close_code
        return {"ended": ended, "close_code": int(code) if ended and code is not None else None,
                "close_reason": self.ws.close_reason if ended else None, "messages": sum(types.values()),
                "bytes": received, "types": dict(types.most_common())}

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


class ReadingTalker(NeverReadingClient):
    """The same caller, but it reads (and discards) everything the server sends: the control that tells what
    a talking caller costs the others from what *not reading* costs them."""

    messages = 0

    async def stream(self, frames: Iterable[bytes], stop: asyncio.Event, *, chunk_ms: int = CHUNK_MS) -> str:
        from websockets.exceptions import ConnectionClosed

        async def read() -> None:
            try:
                async for _ in self.ws:
                    self.messages += 1
            except ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        try:
            return await super().stream(frames, stop, chunk_ms=chunk_ms)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

