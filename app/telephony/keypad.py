"""Keys pressed on a phone, gathered into what the caller keyed in (an order number, say); no I/O here.

Each key is a ``dtmf`` event as it comes (``input_audio_buffer.dtmf_event_received``); the digits also gather
into an entry that reaches the conversation as the caller's words - a user message "Keyed in: 4572" with a
response, so the model (and the support tools it calls) reads the number as if it had been said. A session with
a ``keypad_tool`` (``session.sub250.keypad_tool``) has that response call the tool, its arguments written from
the digits. An entry ends at ``#``, or after :data:`ENTRY_IDLE_S` without a key; ``*`` starts it again.
"""

from __future__ import annotations

from typing import Any

#: Seconds without a key that end an entry (as a phone menu waits for the next digit).
ENTRY_IDLE_S = 3.0
#: Keys one entry holds at most (a card number is 19; more is a stuck key).
MAX_ENTRY = 32


class Keypad:
    def __init__(self) -> None:
        self._digits: list[str] = []

    @property
    def pending(self) -> bool:
        return bool(self._digits)

    def press(self, key: str) -> str | None:
        """One key; returns the entry it completes (``#``), or None."""
        if key == "#":
            return self.finish()
        if key == "*":
            self._digits.clear()
            return None
        if len(self._digits) < MAX_ENTRY:
            self._digits.append(key)
        return None

    def finish(self) -> str | None:
        """The entry so far (the keys stopped coming), or None if there is none."""
        entry, self._digits = "".join(self._digits), []
        return entry or None


def as_words(entry: str) -> str:
    """What the conversation reads for an entry."""
    return f"Keyed in: {entry}"


def keypad_tool(config: Any) -> str:
    """The tool an entry calls: the session's ``keypad_tool`` while it is among its tools, else "" (the model
    decides)."""
    name = config.keypad_tool
    return name if name and any(tool.name == name for tool in config.tools) else ""
