"""A session's counters, mirrored into the process-wide Prometheus metrics (an observer of the session's
events: the parts report what happened, this decides where it is counted)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sub250.metrics import prometheus, tracing
from sub250.metrics.timeline import TurnTimeline


@dataclass
class SessionStats:
    #: The session's id (``sess_...``): the traces of its turns carry it.
    session_id: str = ""
    turns: int = 0
    cancelled: int = 0
    errors: int = 0
    speculative_started: int = 0
    speculative_adopted: int = 0
    speculative_discarded: int = 0
    #: Speech over a live reply that had words (the reply was cancelled) / had none (the reply resumed).
    interruptions: int = 0
    false_interruptions: int = 0
    #: semantic_vad: calls of the end-of-turn model (its last probability is in the log).
    end_of_turn_calls: int = 0
    #: Pauses whose words ended open ("...from the"), held past the turn detection's own silence.
    pauses_held_open: int = 0
    pauses_finished: int = 0

    def speculation_started(self) -> None:
        self.speculative_started += 1
        prometheus.SPECULATIVE.labels(outcome="started").inc()

    def speculation_adopted(self) -> None:
        self.speculative_adopted += 1
        prometheus.SPECULATIVE.labels(outcome="adopted").inc()

    def speculation_discarded(self) -> None:
        self.speculative_discarded += 1
        prometheus.SPECULATIVE.labels(outcome="discarded").inc()

    def interruption(self, *, confirmed: bool) -> None:
        if confirmed:
            self.interruptions += 1
        else:
            self.false_interruptions += 1
        prometheus.INTERRUPTIONS.labels(verdict="confirmed" if confirmed else "false").inc()

    def pause_held_open(self) -> None:
        self.pauses_held_open += 1
        prometheus.PAUSES_HELD_OPEN.inc()

    def pause_finished(self) -> None:
        self.pauses_finished += 1
        prometheus.PAUSES_FINISHED.inc()

    def end_of_turn_scored(self, ms: float) -> None:
        self.end_of_turn_calls += 1
        prometheus.END_OF_TURN_MS.observe(ms)

    def turn_reported(self, timeline: TurnTimeline) -> None:
        """A turn's final latency report went out."""
        prometheus.observe(timeline)
        tracing.observe(timeline, self.session_id)

    def as_dict(self) -> dict[str, int]:
        """The counters."""
        counters = asdict(self)
        del counters["session_id"]
        return counters
