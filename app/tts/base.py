"""The TTS interface: a blocking ``synthesize`` each engine implements, and ``speak``, the async call the session
uses: ``workers`` syntheses at a time per engine, on the engine's own threads, the most urgent waiting one of
every session first (:class:`SpeechNeed`): a reply's first chunk, which the caller waits for in silence, is not
queued behind another reply's later sentences, which its caller is still hearing the earlier ones of; with two
or more threads, later chunks never take the last one, so a first chunk waits at most for another first chunk -
unless a later chunk has waited so long that its reply is about to fall silent: it is then due, and served next."""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from sub250.engine import ThreadedEngine
from sub250.priority_slots import PrioritySlots

T = TypeVar("T")

#: ``[tts] scheduling``: "need" serves waiting syntheses by :class:`SpeechNeed`; "arrival" in turn (the
#: scheduling before it, kept to compare: profile cpu-base-tts-arrival).
SCHEDULING = ("need", "arrival")


class SpeechNeed(enum.IntEnum):
    """Why a chunk is synthesized, most urgent first: the order in which waiting syntheses of all sessions get
    the engine's threads (a running synthesis is never interrupted)."""

    #: A live reply's first chunk: its caller hears nothing until it is done.
    FIRST = 0
    #: A later chunk not synthesized while its reply had audio enough left to play: it is due (its caller would
    #: hear a silence inside the reply), and may take any thread.
    DUE = 1
    #: The first chunk of a reply held at a pause (served as FIRST once the commit adopts the reply).
    AHEAD = 2
    #: A later chunk: its caller is hearing the chunks before it meanwhile.
    LATER = 3


@dataclass(frozen=True)
class AudioChunk:
    """PCM16 mono little-endian bytes at ``sample_rate``; one chunk per sentence."""

    pcm16: bytes
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.pcm16) / 2 / self.sample_rate


class TTSEngine(ThreadedEngine, abc.ABC):
    name = "tts"
    sample_rate: int

    def __init__(self, workers: int = 2, *, fifo: bool = False) -> None:
        super().__init__(workers=workers)
        self._slots = PrioritySlots(workers, fifo=fifo)
        #: Threads a later chunk leaves free for first chunks: the last one, when there are two or more (none
        #: under "arrival": the scheduling before need, kept as it was).
        self._later_leaves = 1 if workers > 1 and not fifo else 0

    @abc.abstractmethod
    def load(self) -> None: ...

    @abc.abstractmethod
    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """Yield one chunk per sentence (blocking, CPU-heavy: run it with :meth:`speak`)."""

    async def speak(self, fn: Callable[..., T], *args: Any,
                    need: SpeechNeed | Callable[[], SpeechNeed] = SpeechNeed.FIRST, due_s: float | None = None) -> T:
        """``fn(*args)`` - a synthesis - on the engine's threads, ``workers`` at a time; waiting ones are served
        by ``need`` (a callable is read each time a thread frees), then by arrival. Cancelling one that waits
        means it never runs; cancelling one that runs returns at once, but its thread stays taken (and the
        next waits) until the synthesis has really finished. A ``LATER`` one leaves a thread free for first
        chunks (two threads or more), for ``due_s`` at most if given: then it asks again as ``DUE``."""
        later = (need() if callable(need) else need) == SpeechNeed.LATER
        if later and self._later_leaves and due_s is not None:
            try:
                await asyncio.wait_for(self._slots.acquire(need, leave_free=self._later_leaves), max(0.0, due_s))
            except TimeoutError:  # a thread granted as the wait ran out was handed back by acquire
                await self._slots.acquire(SpeechNeed.DUE)
        else:
            await self._slots.acquire(need, leave_free=self._later_leaves if later else 0)
        return await self._slots.hold_until_done(lambda: self.run(fn, *args))
