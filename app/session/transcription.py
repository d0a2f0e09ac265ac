"""Committed turns that get no reply (a transcription session, or ``create_response`` false): transcribed, and
their transcript told to the client and kept in the conversation."""

from __future__ import annotations

from typing import Any

import numpy as np

from sub250.protocol import server_events as ev
from sub250.session import stages
from sub250.session.conversation import Conversation
from sub250.session.output import AsConfigured
from sub250.session.turn import UserTurn


class Transcriptions:
    def __init__(self, asr: Any, transport: AsConfigured, conversation: Conversation) -> None:
        self.asr, self.transport, self.conversation = asr, transport, conversation
        #: Transcriptions under way (a server that drains waits for them).
        self.pending = 0

    async def run(self, turn: UserTurn, audio: np.ndarray, prompt: str | None) -> None:
        self.pending += 1
        try:
            turn.transcript = text = await stages.transcribe(self.asr, audio, turn.timeline, prompt)
        except stages.TranscriptionFailed as exc:
            self.transport.send(ev.transcription_failed(turn.item_id, exc.message))
            return
        finally:
            self.pending -= 1
        if (item := self.conversation.set_transcript(turn.item_id, text)) is not None:
            for event in ev.transcript_done(item.to_wire(), text, turn.audio_end_ms / 1000):
                self.transport.send(event)
