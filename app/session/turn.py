"""The caller's side of one turn: its conversation item, its audio span and its latency timeline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from sub250.metrics.timeline import TurnTimeline


@dataclass
class UserTurn:
    item_id: str
    timeline: TurnTimeline
    #: Absolute index of the turn's first input window (prefix padding included).
    first_window: int = 0
    audio_start_ms: int = 0
    audio_end_ms: int = 0
    #: The final transcript once known (a text turn has it from the start).
    transcript: str | None = None
    #: Partial transcripts so far, and how long the retrieval run ahead on a stable one took (ms).
    partials: list[str] = field(default_factory=list)
    prefetch_ms: float | None = None
    #: The measurement of this turn's client round trip (``network_rtt``), while it runs: the final latency
    #: report waits for it (a reply with no LLM call can be done before the PONG is back).
    rtt: asyncio.Task | None = None

    @classmethod
    def new(cls, item_id: str, *, first_window: int = 0, audio_start_ms: int = 0,
            transcript: str | None = None) -> UserTurn:
        return cls(item_id=item_id, timeline=TurnTimeline(turn_id=item_id), first_window=first_window,
                   audio_start_ms=audio_start_ms, transcript=transcript)


class Words:
    """The caller's words a reply answers: known at once (a text turn) or once transcribed."""

    def __init__(self, text: str | None) -> None:
        self.text = text
        self._known = asyncio.Event()
        if text is not None:
            self._known.set()

    def heard(self, text: str) -> None:
        self.text = text
        self._known.set()

    async def wait(self, timeout_s: float) -> str | None:
        """The words, waiting at most ``timeout_s`` for their transcription; None when not known by then."""
        try:
            await asyncio.wait_for(self._known.wait(), timeout_s)
        except TimeoutError:
            return None
        return self.text
