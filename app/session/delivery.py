"""What of one reply reached the client: the text generated and sent, the audio queued and sent, the words
heard. The reply counts here as its output leaves; the conversation keeps what the caller actually got."""

from __future__ import annotations

from sub250.audio.rates import OUTPUT_RATE
from sub250.metrics.timeline import TurnTimeline, now_ns
from sub250.session.conversation import Item


class Delivery:
    def __init__(self, audio: bool, timeline: TurnTimeline) -> None:
        """``audio``: the reply speaks (what the caller got is the words whose audio left); ``timeline``: the
        turn's, marked when the first text and audio leave."""
        self.audio, self.timeline = audio, timeline
        #: Generated text; what of it was written to the client.
        self.text = ""
        self.sent = ""
        self.text_queued = False
        #: Reply audio handed to / sent by the transport.
        self.audio_queued_ms = 0.0
        self.audio_sent_ms = 0.0
        #: Words of the reply whose audio has left (on a media track: was played), from the TTS chunks' words.
        self.words_sent = 0.0
        #: The reply's item in the conversation once finished: audio leaving later still counts for truncation.
        self.item: Item | None = None

    def queue_text(self, text: str) -> None:
        self.text += text
        self.text_queued = True

    def queue_audio(self, nbytes: int) -> float:
        """``nbytes`` of PCM16 reply audio handed to the transport; returns how long they last (ms)."""
        ms = nbytes / 2 / OUTPUT_RATE * 1000
        self.audio_queued_ms += ms
        return ms

    def text_sent(self, text: str, ns: int) -> None:
        self.timeline.mark("first_token_sent", ns)
        self.sent += text

    def audio_sent(self, ms: float, words: float, ns: int) -> bool:
        """``ms`` of audio, ``words`` of the reply, left at ``ns``; True: the first audio of the reply."""
        first = not self.timeline.has("first_audio_sent")
        self.timeline.mark("first_audio_sent", ns)
        self.audio_sent_ms += ms
        self.words_sent += words
        if self.item is not None:
            self.item.audio_ms = self.audio_sent_ms
        return first

    def reached(self, *, called: bool) -> bool:
        """What the reply queued first has reached the client (a media track plays audio in real time, so the
        generation can end first); ``called``: the reply is a tool call (its arguments count as text)."""
        tl = self.timeline
        return not (((self.text_queued or called) and not tl.has("first_token_sent"))
                    or (self.audio_queued_ms and not tl.has("first_audio_sent")))

    def heard(self) -> str:
        """What the caller got of an unfinished reply: the words whose audio left, or the text sent."""
        if not self.audio:
            return self.sent
        return " ".join(self.text.split()[:round(self.words_sent)])

    def playback_left_ms(self) -> float:
        """How much of the audio the caller has still to hear, counted from its first frame leaving (a client
        plays it in real time; 0 for a reply without audio)."""
        first = self.timeline.marks.get("first_audio_sent")
        if first is None:
            return self.audio_queued_ms
        return max(0.0, self.audio_queued_ms - (now_ns() - first) / 1e6)
