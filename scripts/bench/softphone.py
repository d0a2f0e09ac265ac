"""A real SIP softphone for the tests and benchmarks of app/telephony: Debian's ``baresip``, driven over its
``ctrl_tcp`` module (JSON commands in netstrings, call events back).

:class:`Softphone` writes baresip a config of its own (G.711 μ-law only, no sound card: the caller's audio is a
WAV file played as the microphone by ``aufile``, what it hears goes to ALSA's ``null`` device), and ``sndfile``
records both directions to WAV files. ``dial``, ``keys`` (DTMF, RFC 4733) and ``hangup`` are baresip's own
commands; ``heard()`` is the recording of what came back.

    sudo apt-get install baresip      # once (scripts/install-fleet-tools.sh installs it)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

RATE = 8000
MODULES = "/usr/lib/baresip/modules"


def available() -> str | None:
    """None if baresip can run here; else why not."""
    if shutil.which("baresip") is None:
        return "baresip is not installed (scripts/install-fleet-tools.sh installs Debian's)"
    if not Path(MODULES, "ctrl_tcp.so").exists():
        return f"baresip's modules are not in {MODULES}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def caller_wav(path: Path, speech: np.ndarray, rate: int, *, lead_s: float = 0.5, tail_s: float = 30.0) -> Path:
    """The caller's side as baresip plays it: ``lead_s`` of silence, the speech at 8 kHz, then silence (baresip
    hangs up when its file ends)."""
    narrow = soxr.resample(speech.astype(np.float32), rate, RATE) if rate != RATE else speech.astype(np.float32)
    audio = np.concatenate([np.zeros(int(lead_s * RATE), np.float32), narrow, np.zeros(int(tail_s * RATE), np.float32)])
    sf.write(path, audio, RATE, subtype="PCM_16")
    return path


class Softphone:
    """``async with Softphone(workdir, wav) as phone: await phone.dial(uri); ...``"""

    def __init__(self, workdir: Path, wav: Path, *, user: str = "caller", answer: bool = False) -> None:
        """``user``: the caller's SIP user (``sip:USER@127.0.0.1``), what the server sees as the remote.
        ``answer``: the phone answers calls by itself (a person a call is transferred to, at :attr:`uri`)."""
        self.dir = Path(workdir)
        self.wav, self.user, self.answer = wav, user, answer
        self.sip_port = _free_port() if answer else 0
        self.ctrl_port = _free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.events: list[dict[str, Any]] = []
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pump: asyncio.Task | None = None
        self._tokens = 0
        self._answers: dict[str, asyncio.Future] = {}

    def _configure(self) -> None:
        conf, dumps = self.dir / "baresip", self.dir / "recorded"
        conf.mkdir(parents=True, exist_ok=True)
        dumps.mkdir(exist_ok=True)
        (conf / "config").write_text("\n".join([
            "poll_method epoll", f"sip_listen 127.0.0.1:{self.sip_port}",
            "audio_player alsa,null", "audio_alert alsa,null", f"audio_source aufile,{self.wav}",
            f"ausrc_srate {RATE}", f"auplay_srate {RATE}", f"module_path {MODULES}",
            "module g711.so", "module aufile.so", "module alsa.so", "module sndfile.so",
            "module_app account.so", "module_app menu.so", "module_app ctrl_tcp.so",
            f"ctrl_tcp_listen 127.0.0.1:{self.ctrl_port}", f"snd_path {dumps}", ""]))
        answer = ";answermode=auto" if self.answer else ""
        (conf / "accounts").write_text(f"<sip:{self.user}@127.0.0.1>;regint=0;audio_codecs=PCMU{answer}\n")

    @property
    def uri(self) -> str:
        """Where an answering phone takes calls."""
        return f"sip:{self.user}@127.0.0.1:{self.sip_port}"

    async def __aenter__(self) -> Softphone:
        self._configure()
        self.proc = await asyncio.create_subprocess_exec(
            "baresip", "-f", str(self.dir / "baresip"), stdin=asyncio.subprocess.DEVNULL,
            stdout=open(self.dir / "baresip.log", "wb"), stderr=asyncio.subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.ctrl_port)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.returncode is not None:
                    raise RuntimeError(f"baresip did not start: {self.log()[-2000:]}") from None
                await asyncio.sleep(0.1)
        self._pump = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._pump is not None:
            self._pump.cancel()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def log(self) -> str:
        path = self.dir / "baresip.log"
        return path.read_text(errors="replace") if path.exists() else ""

    async def command(self, name: str, params: str = "") -> dict[str, Any]:
        assert self._writer is not None
        self._tokens += 1
        token = str(self._tokens)
        waiter = self._answers[token] = asyncio.get_running_loop().create_future()
        body = json.dumps({"command": name, "params": params, "token": token}).encode()
        self._writer.write(f"{len(body)}:".encode() + body + b",")
        await self._writer.drain()
        return await asyncio.wait_for(waiter, 10)

    async def _read(self) -> None:
        assert self._reader is not None
        while True:
            head = await self._reader.readuntil(b":")
            body = await self._reader.readexactly(int(head[:-1]) + 1)
            msg = json.loads(body[:-1])
            if msg.get("response") and msg.get("token") in self._answers:
                self._answers.pop(msg["token"]).set_result(msg)
            elif msg.get("event"):
                msg["at"] = time.monotonic()
                self.events.append(msg)

    async def dial(self, uri: str) -> None:
        await self.command("dial", uri)

    async def wait_for(self, event_type: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = next((e for e in self.events if e.get("type") == event_type), None)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event_type} within {timeout} s; events: "
                                   f"{[e.get('type') for e in self.events]}; log: {self.log()[-1500:]}")
            await asyncio.sleep(0.05)

    async def keys(self, digits: str) -> None:
        """DTMF (RFC 4733 telephone-events), one key at a time, as a person presses them."""
        for digit in digits:
            await self.command("sndcode", digit)
            await asyncio.sleep(0.25)

    async def hangup(self) -> None:
        await self.command("hangup")

    def heard(self) -> np.ndarray:
        """What the softphone heard (the decoded RTP), float32 at 8 kHz."""
        dumps = sorted((self.dir / "recorded").glob("dump-*-dec.wav"))
        if not dumps:
            return np.zeros(0, np.float32)
        data, rate = sf.read(dumps[-1], dtype="float32")
        return data if rate == RATE else soxr.resample(data, rate, RATE)
