"""The conversation: typed items in order, with an index by id (no linear searches on the hot path).

An item is what the model will see of a turn: the caller's transcript, a typed message, or what the caller
actually heard of a reply (its text is cut to match on barge-in or ``conversation.item.truncate``). Wire
shapes come from :mod:`app.protocol.server_events`; this module only keeps the state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.protocol import server_events as ev


@dataclass
class Item:
    id: str
    role: str  # user | assistant | system (the parser allows no other)
    #: The content part's type: caller audio, typed text, or a reply's audio or text.
    part: ev.PartType
    #: The transcript or text; ``None`` while a caller's audio is still being transcribed.
    text: str | None = None
    status: str = "completed"
    #: For a reply: ms of its audio handed to the caller (what ``truncate`` scales the text by).
    audio_ms: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        return ev.message_item(self.id, self.role, self.status, [ev.content_part(self.part, self.text)])


class Conversation:
    def __init__(self) -> None:
        self._items: dict[str, Item] = {}  # insertion-ordered

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def get(self, item_id: str) -> Item | None:
        return self._items.get(item_id)

    @property
    def last_id(self) -> str | None:
        """The id of the newest item (the ``previous_item_id`` of the next one)."""
        return next(reversed(self._items), None)

    def add(self, item: Item, *, after: str | None = None) -> str | None:
        """Append ``item`` (or place it right after the item ``after``, when that is still here); return the id
        of the item before it. Re-adding an id moves it."""
        self._items.pop(item.id, None)
        if after is None or after not in self._items or after == self.last_id:
            previous = self.last_id
            self._items[item.id] = item
            return previous
        items = list(self._items.items())
        at = next(i for i, (key, _) in enumerate(items) if key == after) + 1
        items.insert(at, (item.id, item))
        self._items = dict(items)
        return after

    def set_transcript(self, item_id: str, text: str) -> Item | None:
        item = self._items.get(item_id)
        if item is not None:
            item.text = text
        return item

    def delete(self, item_id: str) -> bool:
        return self._items.pop(item_id, None) is not None

    def truncate(self, item_id: str, audio_end_ms: int) -> Item | None:
        """Cut an assistant item's text to the share of its audio that was played; None if no such item."""
        item = self._items.get(item_id)
        if item is None or item.role != "assistant":
            return None
        words = (item.text or "").split()
        spoken_ms = max(1.0, item.audio_ms)
        keep = int(len(words) * min(1.0, audio_end_ms / spoken_ms))
        item.text = " ".join(words[:keep])
        return item

    def last_user_text(self) -> tuple[str, str] | None:
        """(item id, text) of the newest user item that has text, for a client's ``response.create``."""
        for item in reversed(self._items.values()):
            if item.role == "user" and item.text:
                return item.id, item.text
        return None

    def for_prompt(self, exclude: str | None = None) -> list[dict[str, str]]:
        """Oldest-first chat messages for the prompt: user and assistant items with text, leaving out
        ``exclude`` (the question being answered). System items are kept but not yet prompted."""
        return [{"role": item.role, "content": item.text} for item in self._items.values()
                if item.id != exclude and item.text and item.role in ("user", "assistant")]
