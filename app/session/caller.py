"""The caller's state (as LiveKit's ``UserState``): one enum, one transition method, each change logged."""

from __future__ import annotations

import enum
import logging

from sub250.session.turn import UserTurn

log = logging.getLogger(__name__)


class CallerState(enum.Enum):
    #: Not speaking (or only to the input buffer, without server VAD).
    LISTENING = "listening"
    #: A sound over the live reply, being checked (the reply is paused): words, or a cough?
    SUSPECTED = "suspected"
    #: Speaking: a turn of their own under way.
    SPEAKING = "speaking"


class Caller:
    def __init__(self) -> None:
        self.state = CallerState.LISTENING
        #: The caller's turn under way (SUSPECTED or SPEAKING), if any.
        self.turn: UserTurn | None = None

    def to(self, state: CallerState, turn: UserTurn | None = None, why: str = "") -> None:
        """The caller is now in ``state``, in ``turn`` (None when LISTENING)."""
        if state is not self.state:
            log.info("caller: %s -> %s%s", self.state.value, state.value, f" ({why})" if why else "")
        self.state, self.turn = state, turn if state is not CallerState.LISTENING else None
