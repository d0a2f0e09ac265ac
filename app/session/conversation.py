"""The conversation: typed items in order, with an index by id (no linear searches on the hot path).

An item is what the model will see of a turn: the caller's transcript, a typed message, or what the caller
actually heard of a reply (its text is cut to match on barge-in or ``conversation.item.truncate``). Wire
shapes come from :mod:`app.protocol.server_events`; this module only keeps the state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sub250.protocol import server_events as ev


@dataclass
class Item:
    id: str
    role: ev.Role  # the parser allows no other
    #: The content part's type: caller audio, typed text, or a reply's audio or text.
    part: ev.PartType
    #: The transcript or text; ``None`` while a caller's audio is still being transcribed.
    text: str | None = None
    status: str = "completed"
    #: For a reply: ms of its audio handed to the caller (what ``truncate`` scales the text by).
    audio_ms: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        return ev.message_item(self.id, self.role, self.status, [ev.content_part(self.part, self.text)])


@dataclass
class FunctionCall:
    """The model's call of a client tool (``function_call``), or the client's own record of one."""

    id: str
    call_id: str
    name: str
    arguments: str
    status: str = "completed"
    #: When the call was handed to the client (server clock, ns; 0: not sent by this server), so the tool's
    #: time is measured when its output comes.
    sent_ns: int = 0
    role: str = "assistant"

    def to_wire(self) -> dict[str, Any]:
        return ev.function_call_item(self.id, self.status, self.call_id, self.name, self.arguments)


@dataclass
class FunctionOutput:
    """A tool's result (``function_call_output``), as the client sent it."""

    id: str
    call_id: str
    output: str
    #: ms from the call being sent to this output arriving (None: the call was not made by this server).
    tool_ms: float | None = None
    role: str = "tool"

    def to_wire(self) -> dict[str, Any]:
        return ev.function_call_output_item(self.id, self.call_id, self.output)


AnyItem = Item | FunctionCall | FunctionOutput
#: ``previous_item_id`` that puts an item first of all (the API's).
ROOT = "root"


class Conversation:
    def __init__(self) -> None:
        self._items: dict[str, AnyItem] = {}  # insertion-ordered
        #: function calls by ``call_id`` (their outputs name them)
        self._calls: dict[str, FunctionCall] = {}

    def __iter__(self) -> Iterator[AnyItem]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def get(self, item_id: str) -> AnyItem | None:
        return self._items.get(item_id)

    def call(self, call_id: str) -> FunctionCall | None:
        """The function call of ``call_id`` still in the conversation, if any."""
        call = self._calls.get(call_id)
        return call if call is not None and call.id in self._items else None

    @property
    def last_id(self) -> str | None:
        """The id of the newest item (the ``previous_item_id`` of the next one)."""
        return next(reversed(self._items), None)

    def add(self, item: AnyItem, *, after: str | None = None) -> str | None:
        """Append ``item`` (or place it right after the item ``after``, when that is still here; ``after=ROOT``:
        first of all); return the id of the item before it. Re-adding an id moves it."""
        self._items.pop(item.id, None)
        if isinstance(item, FunctionCall):
            self._calls[item.call_id] = item
        if after == ROOT:
            self._items = {item.id: item, **self._items}
            return None
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
        if isinstance(item, Item):
            item.text = text
            return item
        return None

    def delete(self, item_id: str) -> bool:
        item = self._items.pop(item_id, None)
        if isinstance(item, FunctionCall):
            self._calls.pop(item.call_id, None)
        return item is not None

    def truncate(self, item_id: str, audio_end_ms: int) -> Item | None:
        """Cut an assistant item's text to the share of its audio that was played; None if no such item."""
        item = self._items.get(item_id)
        if not isinstance(item, Item) or item.role != "assistant":
            return None
        words = (item.text or "").split()
        spoken_ms = max(1.0, item.audio_ms)
        keep = int(len(words) * min(1.0, audio_end_ms / spoken_ms))
        item.text = " ".join(words[:keep])
        return item

    def last_user_text(self) -> tuple[str, str] | None:
        """(item id, text) of the newest user item that has text, for a client's ``response.create``."""
        for item in reversed(self._items.values()):
            if isinstance(item, Item) and item.role == "user" and item.text:
                return item.id, item.text
        return None

    def tool_results(self, after: str) -> list[tuple[FunctionCall | None, FunctionOutput]]:
        """The tool outputs that came after the item ``after`` (the question being answered), oldest first,
        each with its call when that is still here: what a reply to that question answers from."""
        out: list[tuple[FunctionCall | None, FunctionOutput]] = []
        seen = False
        for item in self._items.values():
            if item.id == after:
                seen = True
            elif seen and isinstance(item, FunctionOutput):
                out.append((self.call(item.call_id), item))
        return out

    def for_prompt(self, exclude: str | None = None, *, until: str | None = None) -> list[dict[str, str]]:
        """Oldest-first chat messages for the prompt, leaving out ``exclude`` (the question being answered),
        or only those before the item ``until``: user and assistant messages with text, system messages, and
        tool calls and results written out as text (the chat templates of small models know no tool roles)."""
        out: list[dict[str, str]] = []
        for item in self._items.values():
            if item.id == until:
                break
            if item.id == exclude:
                continue
            if isinstance(item, FunctionCall):
                out.append({"role": "assistant", "content": f"(called {item.name} with {item.arguments})"})
            elif isinstance(item, FunctionOutput):
                call = self.call(item.call_id)
                name = call.name if call is not None else "a tool"
                out.append({"role": "user", "content": f"(result of {name}: {item.output})"})
            elif item.text:
                out.append({"role": item.role, "content": item.text})
        return out
