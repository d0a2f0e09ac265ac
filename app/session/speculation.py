"""Speculative end of turn: the reply prepared at the caller's first pause is held until the commit.

At the first pause (``[vad] speculate_after_ms`` of silence) the session starts a *held* reply on the audio so
far - ASR, retrieval, prompt, prefill, first audio - while the endpointer keeps waiting. If the caller speaks
again, the held reply is discarded (its engine request aborted, nothing sent); if the turn is committed as it
was at the pause, the reply is adopted and released at once (``Reply.adopt``: the timeline's work before the
commit is reported apart, ``TurnTimeline.rebase_to_commit``).
"""

from __future__ import annotations

from sub250.protocol.session_config import SessionConfig
from sub250.session.reply import Reply, ReplyState
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn


class Speculation:
    def __init__(self) -> None:
        self.held: Reply | None = None

    @staticmethod
    def enabled(config: SessionConfig, tuning: PipelineTuning) -> bool:
        """On when the session says so (``session.sub250.speculative_turns``), else when the profile does."""
        if config.speculative_turns is not None:
            return config.speculative_turns
        return tuning.speculate_after_ms > 0

    def held_for(self, turn: UserTurn) -> Reply | None:
        """The reply held at the pause of ``turn`` now: its ``question`` is the caller's words up to the pause."""
        held = self.held
        return held if held is not None and held.turn is turn and held.state is ReplyState.HELD else None

    def hold(self, reply: Reply) -> None:
        self.held = reply

    def speech_resumed(self) -> None:
        """The pause was a breath: throw the held reply away."""
        if self.held is not None:
            self.held.discard()
            self.held = None

    def commit(self, turn: UserTurn, commit_ns: int) -> bool:
        """The turn is committed: adopt the held reply if it was prepared on this very turn."""
        reply, self.held = self.held, None
        if reply is None or reply.state is not ReplyState.HELD:
            return False
        if reply.turn is not turn:
            reply.discard()
            return False
        reply.adopt(commit_ns)
        return True
