"""Typed views of server events (the raw dict is always kept in ``.data``)."""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass, field
from typing import Any


@functools.cache
def _ga_events() -> Any:
    """A pydantic TypeAdapter of the GA server event union, from the ``openai`` package (optional)."""
    try:
        from openai.types.realtime import RealtimeServerEvent
    except ImportError:
        raise ImportError("typed GA events need the openai package: pip install openai") from None
    import pydantic

    return pydantic.TypeAdapter(RealtimeServerEvent)


@dataclass(frozen=True)
class ServerEvent:
    type: str
    data: dict[str, Any]
    #: Client clock (time.perf_counter_ns) when the event was received.
    received_ns: int = 0

    @property
    def is_error(self) -> bool:
        return self.type == "error"

    @property
    def error_code(self) -> str | None:
        return (self.data.get("error") or {}).get("code") if self.is_error else None

    @property
    def delta(self) -> str:
        return self.data.get("delta", "")

    def audio(self) -> bytes:
        """PCM16 24 kHz bytes of a ``response.output_audio.delta``."""
        return base64.b64decode(self.data.get("delta", ""))

    def typed(self) -> Any:
        """The event as a typed object: for a GA event the ``openai`` package's pydantic model of it
        (``ResponseDoneEvent``, ``ResponseFunctionCallArgumentsDoneEvent`` ...; validated, so a field of the
        wrong shape raises ``pydantic.ValidationError``), for ours :class:`TurnLatency` / :class:`Sources`."""
        if self.type == "sub250.turn.latency":
            return TurnLatency.from_event(self)
        if self.type == "sub250.sources":
            return Sources.from_event(self)
        if self.type.startswith("sub250."):
            return self  # partial transcripts: the dict is the whole of it
        return _ga_events().validate_python(self.data)


@dataclass(frozen=True)
class TurnLatency:
    """``sub250.turn.latency``: marks (ms since the turn's first mark), spans, verdict."""

    turn_id: str
    final: bool
    outcome: str
    marks: dict[str, float]
    spans: dict[str, float | None]
    beside: dict[str, float | None]
    meets_budget: bool | None
    over_budget: list[str]
    tokens: int = 0
    spec_decoding: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_event(cls, ev: ServerEvent) -> TurnLatency:
        d = ev.data
        return cls(turn_id=d.get("turn_id", ""), final=bool(d.get("final")), outcome=d.get("outcome", ""),
                   marks=d.get("marks", {}), spans=d.get("spans", {}), beside=d.get("beside", {}),
                   meets_budget=d.get("meets_budget"), over_budget=list(d.get("over_budget", [])),
                   tokens=int(d.get("tokens", 0)), spec_decoding=d.get("spec_decoding"), raw=d)

    def table(self) -> str:
        """A small text table of the spans against their ceilings."""
        ceilings = self.raw.get("ceilings_ms", {})
        rows = [f"{'span':<16}{'ms':>9}{'ceiling':>9}"]
        for name, value in {**self.spans, **self.beside}.items():
            if value is None:
                continue
            c = ceilings.get(name)
            flag = "  OVER" if name in self.over_budget else ""
            unit = "" if name in ("tokens_per_s", "spec_acceptance") else ""
            rows.append(f"{name:<16}{value:>9.1f}{(f'{c:.0f}' if c else ''):>9}{unit}{flag}")
        verdict = {True: "meets the 250 ms budget", False: "over budget", None: "no verdict"}[self.meets_budget]
        rows.append(f"-> {verdict}")
        return "\n".join(rows)


@dataclass(frozen=True)
class Sources:
    response_id: str
    sources: list[dict[str, Any]]

    @classmethod
    def from_event(cls, ev: ServerEvent) -> Sources:
        return cls(ev.data.get("response_id", ""), list(ev.data.get("sources", [])))
