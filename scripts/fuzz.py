#!/usr/bin/env python
"""Live fuzz: malformed and odd client events over concurrent connections, every answer checked.

    .venv/bin/python scripts/fuzz.py [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY | --no-auth] [--events 10000]
        [--connections 4] [--rate 100] [--seed 1] [--probe-every 1000] [--with-closes]
        [--max-event-bytes 1048576] [--out reports/fuzz.json]

Against a running server (loopback only), each connection sends a seeded mix of frames, paced so that all
connections together send ``--rate`` frames per second (keep it under the key's message rate, 500/s by
default): invalid JSON, non-objects, deep nesting (50-5000 levels, inside ``session`` too), 5000-digit
integers, ``NaN``/``Infinity``, the wrong type for every field of every client event, unknown and missing
types, bad event ids, binary frames, events over ``max_event_bytes``, valid events whose state makes them
fail (``response.cancel`` with nothing running, a commit of an empty buffer, unknown items), and valid
``session.update``/item events. With ``--with-closes``, a few frames the WebSocket layer must answer by
closing: invalid UTF-8 in a text frame (1007) and a frame over ``max_frame_bytes`` (1009); the connection
is reopened after each.

Every frame carries the answers the protocol documents for it (docs/PROTOCOL.md): an ``error`` with a
code from a set (and the ``param`` it must name, the ``event_id`` it must echo), a sequence of success
events, or a close code. Answers are matched by ``error.event_id`` when the server echoes one, else in
order (the server answers one connection's frames in order), with ``--answer-timeout``. An error message
with exception-looking text (a traceback, ``line 1 column``, ...) or quoting more than 40 characters of a
client value is a wrong answer. After every ``--probe-every`` frames and at the end, every connection
runs a normal text turn through ``RealtimeClient``; it must complete.

Keep ``--rate`` under the key's rate: a frame the server refuses with ``rate_limit_exceeded`` counts as
documented only when this fuzzer's own view of the key's bucket had run low, and a refused frame breaks the
ones that depend on it (an item's delete after its refused create, a probe turn).

Prints a table per class (sent, answered as documented, wrong, unanswered, closes by code), writes the
JSON report (``--out``) and exits 1 when anything but documented answers and the expected closes happened
(or a probe failed, or ``--time-limit`` ran out).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import string
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.frames import Raw, dumps  # noqa: E402
from scripts.bench.options import default_key  # noqa: E402
from sub250.sdk import RealtimeClient  # noqa: E402
from sub250.sdk.client import ConnectionLost  # noqa: E402

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: Text an error message must never carry: the server's messages are its own, never an exception's.
LEAK_MARKERS = ("Traceback", "Error:", "Exception", "object has no attribute", "line 1 column", "(char ",
                "Expecting ", "Errno", 'File "', "codec can't")
#: Long client strings are made of this letter, so a message quoting more than 40 of them is seen.
FILL = "Z"
MAX_QUOTE = 40
#: A sanity bound on an error message ("the server's own short text").
MAX_MESSAGE_CHARS = 400
PROBE_QUESTION = "How much is the yearly Care+ membership?"
#: Frames a connection may have in flight, unanswered, before its sender waits (the server reads a
#: connection's frames in order; this only keeps memory and answer latency bounded).
MAX_IN_FLIGHT = 256
#: How many waiting frames an answer without an event_id may skip to find the frame it answers.
LOOKAHEAD = 8


# --- frames and what they must be answered with ---------------------------------------------------


def preview(value: Any, n: int = 40) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= n else f"{text[:n]}...({len(text)} chars)"


@dataclass(frozen=True)
class Expect:
    """The documented answers to one frame: an ``error`` with one of ``codes`` (naming a ``param`` that
    starts with ``param``, echoing ``echo`` as ``error.event_id``), or the events of ``success`` in order,
    or a close with code ``close``."""

    codes: frozenset[str] = frozenset()
    success: tuple[str, ...] = ()
    close: int | None = None
    param: str | None = None
    echo: str | None = None

    def describe(self) -> str:
        parts = []
        if self.codes:
            parts.append("error " + "|".join(sorted(self.codes)) + (f" param={self.param}" if self.param else "")
                         + (f" event_id={self.echo}" if self.echo else ""))
        if self.success:
            parts.append(" + ".join(self.success))
        if self.close is not None:
            parts.append(f"close {self.close}")
        return " or ".join(parts)


def error(*codes: str, param: str | None = None, echo: str | None = None) -> Expect:
    return Expect(codes=frozenset(codes), param=param, echo=echo)


def success(*types: str) -> Expect:
    return Expect(success=types)


@dataclass
class Frame:
    data: str | bytes
    expect: Expect
    #: bytes sent as a text frame (invalid UTF-8 on purpose).
    text_bytes: bool = False
    #: The event_id this frame carries (for matching an echoed ``error.event_id``), if any.
    event_id: str | None = None


@dataclass
class Case:
    cls: str
    name: str
    frames: list[Frame]

    @property
    def closes(self) -> bool:
        return any(f.expect.close is not None for f in self.frames)


# --- the generator --------------------------------------------------------------------------------

NOT_STR = [5, 1.5, True, [], {}, ["x"]]
NOT_OBJ = [5, "x", True, [], [1, 2]]
NOT_BOOL = ["true", 1, 0, [], {}]
NOT_NAME = [5, "", FILL * 65, [], {}, True]
NOT_ID = [5, "", FILL * 65, [], {}, True, 1.5]
#: Random text after a "{": no '"', so the decoder fails before it could read any number.
GARBAGE = string.printable.replace('"', "")
SURROGATE = Raw('"\\ud800 lone surrogate"')
BIG_TEXT = FILL * 33_000  # over the 32 KiB limit of instructions and of an item's text
IV = ("invalid_value",)
FMT = ("unsupported_audio_format",)

#: Valid events, each with every field right; a wrong-type case replaces one field.
BASES: dict[str, dict[str, Any]] = {
    "session.update": {"type": "session.update", "session": {"type": "realtime"}},
    "input_audio_buffer.append": {"type": "input_audio_buffer.append", "audio": "AAAA"},
    "conversation.item.create": {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}},
    "conversation.item.truncate": {"type": "conversation.item.truncate", "item_id": "item_fuzz_none",
                                   "content_index": 0, "audio_end_ms": 100},
    "conversation.item.delete": {"type": "conversation.item.delete", "item_id": "item_fuzz_none"},
    "response.create": {"type": "response.create", "response": {}},
    "response.cancel": {"type": "response.cancel", "response_id": "resp_fuzz_none"},
}

#: (event, path of the field, wrong values, codes): the wrong type or range for every field the server reads
#: (docs/PROTOCOL.md, "Client events" and "Limits"). Every one is ``invalid_value`` naming the field, except
#: audio formats (``unsupported_audio_format``), item types and content parts (``unsupported_item``,
#: ``unsupported_content``) and audio payloads (``invalid_audio``).
S = ("session",)
TD = ("session", "audio", "input", "turn_detection")
TR = ("session", "audio", "input", "transcription")
WRONG_TYPES: list[tuple[str, tuple[str | int, ...], list[Any], tuple[str, ...]]] = [
    ("session.update", S, NOT_OBJ + [None], IV),
    ("session.update", S + ("type",), [5, "translation", [], {}], IV),
    ("session.update", S + ("instructions",), NOT_STR + [SURROGATE, BIG_TEXT], IV),
    ("session.update", S + ("output_modalities",), [5, "text", ["video"], [], [1], {}, ["text", 5]], IV),
    ("session.update", S + ("max_output_tokens",),
     ["abc", [1], -1, 0, 4097, Raw("1e9"), 1000000000, 1.5, True, {}, "Infinity"], IV),
    ("session.update", S + ("tools",), [5, "x", [1], {}, ["x"]], IV),
    ("session.update", S + ("tool_choice",), [5, [], True, 1.5], IV),
    ("session.update", S + ("prompt",), NOT_OBJ, IV),
    ("session.update", S + ("reasoning",), NOT_OBJ, IV),
    ("session.update", S + ("parallel_tool_calls",), NOT_BOOL, IV),
    ("session.update", S + ("model",), NOT_NAME, IV),
    ("session.update", S + ("include",), [5, "x", [5], {}, [FILL * 65]], IV),
    ("session.update", S + ("tracing",), [5, [], True], IV),
    ("session.update", S + ("truncation",), [5, [], True], IV),
    ("session.update", S + ("sub250",), NOT_OBJ, IV),
    ("session.update", S + ("sub250", "speculative_turns"), NOT_BOOL, IV),
    ("session.update", S + ("audio",), NOT_OBJ, IV),
    ("session.update", S + ("audio", "input"), ["pcm16", [1, 2], 7, True], IV),
    ("session.update", S + ("audio", "output"), ["pcm16", [1, 2], 7, True], IV),
    ("session.update", S + ("audio", "input", "format"),
     ["pcm16", 5, [], {}, {"type": "audio/opus"}, {"type": "audio/pcmu", "rate": 16000},
      {"type": "audio/pcm", "rate": 16000},
      {"type": "audio/pcm", "rate": "24000"}, {"type": "audio/pcm", "rate": True}], FMT),
    ("session.update", S + ("audio", "output", "format"),
     ["pcm16", 7, {"type": "audio/g729"}, {"type": "audio/pcma", "rate": 24000},
      {"type": "audio/pcm", "rate": 48000}], FMT),
    ("session.update", S + ("audio", "input", "noise_reduction"), [5, "x", [], True], IV),
    ("session.update", TD, [5, "x", [], True, {"type": "semantic_vad", "eagerness": "x"}], IV),
    ("session.update", TD + ("threshold",), ["0.5", 0, 1, 2, -0.1, True, []], IV),
    ("session.update", TD + ("silence_duration_ms",), ["500", 50, 6000, 1.5, True], IV),
    ("session.update", TD + ("prefix_padding_ms",), [-1, 2001, "x", 1.5], IV),
    ("session.update", TD + ("create_response",), NOT_BOOL, IV),
    ("session.update", TD + ("interrupt_response",), NOT_BOOL, IV),
    ("session.update", TD + ("idle_timeout_ms",), [100, 40000, "x"], IV),
    ("session.update", TR, [5, "x", [], True], IV),
    ("session.update", TR + ("model",), NOT_NAME, IV),
    ("session.update", TR + ("language",), NOT_NAME, IV),
    ("session.update", TR + ("prompt",), [5, [], {}, BIG_TEXT], IV),
    ("session.update", TR + ("languages",), [5, [5], "en"], IV),
    ("session.update", TR + ("keywords",), ["x", [5], 5], IV),
    ("session.update", ("session", "audio", "output", "speed"), ["1", 0, 2, True, []], IV),
    ("session.update", ("session", "audio", "output", "voice"), [5, "", FILL * 65, [], {}, {"id": 5}, True], IV),
    ("input_audio_buffer.append", ("audio",), [5, [], {}, None, True], IV),
    ("input_audio_buffer.append", ("audio",), ["%%%", "", "AA==", "A", "AAA"], ("invalid_audio",)),
    ("conversation.item.create", ("item",), NOT_OBJ + [None], IV),
    ("conversation.item.create", ("item", "type"), ["item_reference", 5, [], "audio"], ("unsupported_item",)),
    ("conversation.item.create", ("item", "id"), NOT_ID, IV),
    ("conversation.item.create", ("item", "role"), [5, "developer", [], None, {}], IV),
    ("conversation.item.create", ("item", "content"),
     [5, "x", [], {}, None, [{"type": "input_text", "text": "a"}] * 65], IV),
    ("conversation.item.create", ("item", "content", 0),
     [5, "x", None, {"type": "input_audio", "audio": "AAAA"}, {"type": "input_image"}, {}], ("unsupported_content",)),
    ("conversation.item.create", ("item", "content", 0, "text"), [5, [], None, {}, True, BIG_TEXT, SURROGATE], IV),
    ("conversation.item.create", ("previous_item_id",), [5, "", FILL * 65, [], True], IV),
    ("conversation.item.truncate", ("item_id",), NOT_ID + [None], IV),
    ("conversation.item.truncate", ("content_index",), ["0", -1, 64, 1.5, None, True], IV),
    ("conversation.item.truncate", ("audio_end_ms",), [-1, 86_400_001, "5", 1.5, None, True], IV),
    ("conversation.item.delete", ("item_id",), NOT_ID + [None], IV),
    ("response.create", ("response",), [5, "x", [], True], IV),
    ("response.create", ("response", "instructions"), [5, {}, [], True, BIG_TEXT, SURROGATE], IV),
    ("response.create", ("response", "output_modalities"), [5, ["video"], "text", [], {}, [None]], IV),
    ("response.create", ("response", "max_output_tokens"),
     ["abc", [1], -1, 0, 4097, Raw("1e9"), 1000000000, 1.5, {}, True], IV),
    ("response.create", ("response", "metadata"),
     [5, "x", [], {"k": 5}, {f"k{i}": "v" for i in range(17)}, {FILL * 65: "v"}, {"k": FILL * 513}], IV),
    ("response.create", ("response", "conversation"), [5, "", [], FILL * 65], IV),
    ("response.create", ("response", "audio"), [5, "x", []], IV),
    ("response.create", ("response", "input"), [5, "x", [5], {}], IV),
    ("response.create", ("response", "tools"), [5, [1]], IV),
    ("response.create", ("response", "tool_choice"), [5, []], IV),
    ("response.create", ("response", "parallel_tool_calls"), ["x", 1], IV),
    ("response.cancel", ("response_id",), [5, "", FILL * 65, [], True], IV),
]

#: Valid ``session.update`` payloads (harmless to the probe turns, which set what they need).
VALID_UPDATES: list[dict[str, Any]] = [
    {"type": "realtime", "instructions": "You are the support agent of Halden Labs. Answer in one short sentence."},
    {"type": "realtime", "max_output_tokens": "inf"},
    {"type": "realtime", "max_output_tokens": 64, "output_modalities": ["text"]},
    {"type": "realtime", "output_modalities": ["audio"]},
    {},
    {"type": "realtime", "instructions": None, "tools": [], "tool_choice": "auto", "unknown_field": {"x": [1, 2]}},
    {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}},
               "output": {"format": {"type": "audio/pcm"}, "voice": "joe", "speed": 1.0}}},
    {"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 0.5, "silence_duration_ms": 500}}}},
    {"audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}}}},
    {"sub250": {"speculative_turns": True}, "tracing": "auto", "truncation": "auto"},
]


def set_path(event: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = event
    for key in path[:-1]:
        nxt = node[key] if isinstance(key, int) else node.get(key)
        if not isinstance(nxt, (dict, list)):
            nxt = {}
            node[key] = nxt
        node = nxt
    node[path[-1]] = value


def param_of(path: tuple[str | int, ...]) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


def deep(rng: random.Random, depth: int) -> str:
    """``depth`` levels of arrays, objects, or both; or only opening brackets (not JSON either way)."""
    kind = rng.choice(("array", "object", "mixed", "open"))
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    if kind == "mixed":
        arrays = [rng.random() < 0.5 for _ in range(depth)]
        return ("".join("[" if a else '{"k":' for a in arrays) + "0"
                + "".join("]" if a else "}" for a in reversed(arrays)))
    return "[" * depth


class Generator:
    """A seeded stream of cases for one connection."""

    def __init__(self, seed: str, conn: int, *, max_event_bytes: int, max_frame_bytes: int,
                 with_closes: bool) -> None:
        self.rng = random.Random(f"{seed}:{conn}")
        self.conn = conn
        self.n = 0
        self.max_event_bytes, self.max_frame_bytes = max_event_bytes, max_frame_bytes
        table: list[tuple[float, str, Callable[[], Case]]] = [
            (8, "invalid_json", self.invalid_json),
            (3, "non_object", self.non_object),
            (6, "deep_nesting", self.deep_nesting),
            (6, "huge_number", self.huge_number),
            (5, "non_finite", self.non_finite),
            (35, "wrong_type", self.wrong_type),
            (5, "unknown_type", self.unknown_type),
            (4, "missing_type", self.missing_type),
            (4, "bad_event_id", self.bad_event_id),
            (5, "binary", self.binary),
            (0.5, "oversized_event", self.oversized),
            (10, "stateful", self.stateful),
            (3, "valid_update", self.valid_update),
            (3, "valid_item", self.valid_item),
        ]
        if with_closes:
            table.append((1.0, "protocol_close", self.protocol_close))
        self.weights = [w for w, _, _ in table]
        self.makers = [m for _, _, m in table]

    def __iter__(self) -> Iterator[Case]:
        while True:
            yield self.rng.choices(self.makers, self.weights)[0]()

    def eid(self) -> str:
        self.n += 1
        return f"fz{self.conn}_{self.n}"

    # each maker returns one case

    def invalid_json(self) -> Case:
        eid = self.eid()
        rng = self.rng
        garbage = "{" + "".join(rng.choice(GARBAGE) for _ in range(rng.randint(0, 200)))
        raw = rng.choice(["{", "", " ", '{"type": "response.cancel"', "}{", "{} {}", "{'type': 'response.cancel'}",
                          "[1,]", '{"type": "response.cancel",}', "nul", "tru", '"unterminated', "\ufeff{}",
                          f'{{"type": "response.cancel", "event_id": "{eid}"}} x', '{"type": "\x01"}',
                          '{"type": "response.cancel" "event_id": "x"}', garbage])
        if _parses(raw):  # random text that happens to be JSON ("{ }") is made not to be
            raw += " x"
        return Case("invalid_json", f"invalid JSON {preview(raw)!r}", [Frame(raw, error("invalid_json"))])

    def non_object(self) -> Case:
        raw = self.rng.choice(["[]", "5", '"response.cancel"', "null", "true", "-0.5",
                               '[{"type": "response.cancel"}]', "[[]]"])
        return Case("non_object", f"non-object {raw}", [Frame(raw, error("invalid_event"))])

    def deep_nesting(self) -> Case:
        eid = self.eid()
        rng = self.rng
        depth = rng.choice((50, 64, 100, 500, 990, 1000, 2000, 5000, rng.randint(33, 5000)))
        where = rng.choice(("top", "session", "response", "item", "value", "limit", "in_string"))
        body = deep(rng, depth)
        if where == "top":
            raw = body
        elif where == "session":
            raw = f'{{"type": "session.update", "event_id": "{eid}", "session": {{"instructions": {body}}}}}'
        elif where == "response":
            raw = f'{{"type": "response.create", "event_id": "{eid}", "response": {{"input": {body}}}}}'
        elif where == "item":
            raw = (f'{{"type": "conversation.item.create", "event_id": "{eid}", "item": {{"type": "message", '
                   f'"role": "user", "content": {body}}}}}')
        elif where == "value":
            raw = f'{{"type": "response.cancel", "event_id": "{eid}", "extra": {body}}}'
        elif where == "limit":  # 32 levels in all is allowed, 33 is not
            inner = 32 - 2 if rng.random() < 0.5 else 33 - 2
            raw = (f'{{"type": "session.update", "event_id": "{eid}", "session": {{"unknown": '
                   + "[" * inner + "]" * inner + "}}")
            expect = success("session.updated") if inner == 30 else error("invalid_json")
            return Case("deep_nesting", f"nesting of {inner + 2} levels in session", [Frame(raw, expect, event_id=eid)])
        else:  # brackets inside a string are not nesting
            raw = json.dumps({"type": "response.cancel", "event_id": eid, "note": body + '\\"[[' + "{" * 100})
            return Case("deep_nesting", f"{depth} brackets inside a string",
                        [Frame(raw, error("response_not_found", echo=eid), event_id=eid)])
        return Case("deep_nesting", f"nesting {depth} levels ({where})", [Frame(raw, error("invalid_json"))])

    def huge_number(self) -> Case:
        eid = self.eid()
        rng = self.rng
        digits = rng.choice(("9" * 5000, "-" + "9" * 5000, "1" + "0" * 400, str(2**53 + 1), "-" + str(2**53 + 1),
                             "9" * 17))
        number = rng.choice((Raw(digits), Raw("1e400"), Raw("-1e400"), Raw("1" * 400 + ".5"), Raw("1e999999999")))
        where = rng.choice(("event_id", "audio_end_ms", "content_index", "session.max_output_tokens",
                            "response.max_output_tokens", "unknown", "array", "threshold"))
        if where == "event_id":
            ev = {"type": "response.cancel", "event_id": number}
        elif where in ("audio_end_ms", "content_index"):
            ev = dict(BASES["conversation.item.truncate"], event_id=eid)
            ev[where] = number
        elif where == "session.max_output_tokens":
            ev = {"type": "session.update", "event_id": eid, "session": {"max_output_tokens": number}}
        elif where == "response.max_output_tokens":
            ev = {"type": "response.create", "event_id": eid, "response": {"max_output_tokens": number}}
        elif where == "threshold":
            ev = {"type": "session.update", "event_id": eid,
                  "session": {"audio": {"input": {"turn_detection": {"threshold": number}}}}}
        elif where == "unknown":
            ev = {"type": "session.update", "event_id": eid, "session": {"unknown": number}}
        else:
            ev = {"type": "response.cancel", "event_id": eid, "extra": [1, 2, number]}
        # refused while the frame is decoded: no event_id can be echoed
        return Case("huge_number", f"{preview(number, 24)} as {where}", [Frame(dumps(ev), error("invalid_value"))])

    def non_finite(self) -> Case:
        eid = self.eid()
        lit = Raw(self.rng.choice(("NaN", "Infinity", "-Infinity")))
        ev = self.rng.choice((
            lit,
            {"type": "response.cancel", "event_id": eid, "x": lit},
            {"type": "session.update", "event_id": eid, "session": {"audio": {"output": {"speed": lit}}}},
            {"type": "session.update", "event_id": eid,
             "session": {"audio": {"input": {"turn_detection": {"threshold": lit}}}}},
            {"type": "response.create", "event_id": eid, "response": {"max_output_tokens": lit}},
            {"type": "conversation.item.truncate", "event_id": eid, "item_id": "x", "content_index": 0,
             "audio_end_ms": lit},
        ))
        return Case("non_finite", f"{lit} in {preview(ev, 60)}", [Frame(dumps(ev), error("invalid_json"))])

    def wrong_type(self) -> Case:
        eid = self.eid()
        etype, path, values, codes = self.rng.choice(WRONG_TYPES)
        value = self.rng.choice(values)
        ev = json.loads(json.dumps(BASES[etype]))
        ev["event_id"] = eid
        set_path(ev, path, value)
        param = param_of(path)
        return Case("wrong_type", f"{etype} {param}={preview(value, 30)}",
                    [Frame(dumps(ev), error(*codes, param=param, echo=eid), event_id=eid)])

    def unknown_type(self) -> Case:
        eid = self.eid()
        etype = self.rng.choice(["input_audio_buffer.explode", "", "RESPONSE.CANCEL", "response.cancel ",
                                 FILL * 10_000, "session.updated", "conversation.item.fetch",
                                 "output_audio_buffer.flush", "transcription_session.update", "résponse.créate",
                                 SURROGATE, "error"])
        ev = {"type": etype, "event_id": eid}
        return Case("unknown_type", f"type {preview(etype, 30)}",
                    [Frame(dumps(ev), error("unknown_event_type", param="type", echo=eid), event_id=eid)])

    def missing_type(self) -> Case:
        eid = self.eid()
        ev = self.rng.choice([{}, {"event_id": eid}, {"type": 5, "event_id": eid}, {"type": None, "event_id": eid},
                              {"type": [], "event_id": eid}, {"type": {"x": 1}, "event_id": eid},
                              {"Type": "response.cancel", "event_id": eid}, {"type": True, "event_id": eid}])
        echo = eid if "event_id" in ev else None
        return Case("missing_type", f"missing type {preview(ev, 40)}",
                    [Frame(dumps(ev), error("missing_type", param="type", echo=echo), event_id=echo)])

    def bad_event_id(self) -> Case:
        value = self.rng.choice([5, "", FILL * 65, [], {}, True, 1.5, SURROGATE])
        ev = {"type": "response.cancel", "event_id": value}
        return Case("bad_event_id", f"event_id={preview(value, 30)}",
                    [Frame(dumps(ev), error("invalid_value", param="event_id"))])

    def binary(self) -> Case:
        rng = self.rng
        data = rng.choice([b"\x00\x01binary", b"{}", b'{"type": "response.cancel"}', b"",
                           bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))])
        return Case("binary", f"binary frame of {len(data)} bytes", [Frame(data, error("invalid_event"))])

    def oversized(self) -> Case:
        eid = self.eid()
        size = self.max_event_bytes + self.rng.randint(1, 4096)
        kind = self.rng.choice(("append", "instructions", "garbage", "binary"))
        if kind == "append":
            head = f'{{"type": "input_audio_buffer.append", "event_id": "{eid}", "audio": "'
            data: str | bytes = head + "A" * (size - len(head) - 2) + '"}'
        elif kind == "instructions":
            head = f'{{"type": "session.update", "event_id": "{eid}", "session": {{"instructions": "'
            data = head + FILL * (size - len(head) - 3) + '"}}'
        elif kind == "garbage":
            data = "{" * 10 + FILL * size
        else:
            data = bytes(size)
        return Case("oversized_event", f"{kind} of {len(data)} bytes", [Frame(data, error("event_too_large"))])

    def stateful(self) -> Case:
        """Valid events the conversation's state refuses (no response runs, the buffer is empty, no such item)."""
        eid = self.eid()
        ev, expect = self.rng.choice([
            ({"type": "response.cancel"}, error("response_not_found", echo=eid)),
            ({"type": "response.cancel", "response_id": "resp_fuzz_none"}, error("response_not_found", echo=eid)),
            ({"type": "response.cancel", "response_id": None}, error("response_not_found", echo=eid)),
            ({"type": "input_audio_buffer.commit"}, error("input_audio_buffer_commit_empty", echo=eid)),
            ({"type": "input_audio_buffer.commit", "unknown": [1]}, error("input_audio_buffer_commit_empty", echo=eid)),
            ({"type": "input_audio_buffer.clear"}, success("input_audio_buffer.cleared")),
            (BASES["conversation.item.delete"], error("item_not_found", echo=eid)),
            (BASES["conversation.item.truncate"], error("item_not_found", echo=eid)),
            ({"type": "response.create"}, error("no_user_input", echo=eid)),
            ({"type": "response.create", "response": None}, error("no_user_input", echo=eid)),
            ({"type": "response.create", "response": {"max_output_tokens": "inf", "output_modalities": ["text"],
                                                      "instructions": "x", "metadata": {"k": "v"}}},
             error("no_user_input", echo=eid)),
            ({"type": "response.cancel", "event_id": "\u00e9" * 64}, error("response_not_found", echo="\u00e9" * 64)),
            # a repeated key: the last one counts (as in every JSON decoder the API's clients use)
            (Raw(f'{{"type": "input_audio_buffer.explode", "event_id": "{eid}", "type": "response.cancel"}}'),
             error("response_not_found", echo=eid)),
        ])
        if isinstance(ev, Raw):
            return Case("stateful", "a repeated 'type' key", [Frame(str(ev), expect, event_id=eid)])
        ev = {**ev}
        ev.setdefault("event_id", eid)
        rest = {k: v for k, v in ev.items() if k not in ("type", "event_id")}
        return Case("stateful", f"{ev['type']} {preview(rest, 40)}",
                    [Frame(dumps(ev), expect, event_id=ev["event_id"])])

    def valid_update(self) -> Case:
        eid = self.eid()
        session = self.rng.choice(VALID_UPDATES)
        ev = {"type": "session.update", "event_id": eid, "session": session}
        return Case("valid_update", f"session.update {preview(session, 40)}",
                    [Frame(dumps(ev), success("session.updated"), event_id=eid)])

    def valid_item(self) -> Case:
        eid, eid2 = self.eid(), self.eid()
        rng = self.rng
        item_id = f"item_{eid}"
        content = rng.choice([
            [{"type": "input_text", "text": "a note from the fuzzer"}],
            [{"type": "input_text", "text": "é✓ 漢字 \U0001f600"}],
            [{"type": "input_text", "text": "x"}] * 64,               # the most parts an item may have
            [{"type": "input_text", "text": "y" * 32 * 1024}],        # exactly 32 KiB of text
            [{"type": "text", "text": "b"}, {"type": "output_text", "text": "c"}],
        ])
        create = {"type": "conversation.item.create", "event_id": eid,
                  "item": {"type": "message", "id": item_id, "role": "system", "content": content}}
        delete = {"type": "conversation.item.delete", "event_id": eid2, "item_id": item_id}
        return Case("valid_item", f"system item of {len(content)} parts, then delete", [
            Frame(json.dumps(create), success("conversation.item.added", "conversation.item.done"), event_id=eid),
            Frame(json.dumps(delete), success("conversation.item.deleted"), event_id=eid2)])

    def protocol_close(self) -> Case:
        if self.rng.random() < 0.25:
            data = "x" * (self.max_frame_bytes + 1)
            return Case("protocol_close", f"text frame of {len(data)} bytes", [Frame(data, Expect(close=1009))])
        raw = self.rng.choice([b'{"type": "\xff\xfe"}', b"\xc3\x28", b"\xc0\xaf", b'{"type": "\xf8\x88\x80\x80\x80"}',
                               b'{"type": "response.cancel", "x": "\xed\xa0\x80"}'])
        return Case("protocol_close", f"invalid UTF-8 {raw[:24]!r}", [Frame(raw, Expect(close=1007), text_bytes=True)])


def _parses(raw: str) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


# --- results --------------------------------------------------------------------------------------

@dataclass
class ClassStats:
    sent: int = 0
    documented: int = 0
    wrong: int = 0
    unanswered: int = 0
    closes: Counter = field(default_factory=Counter)  # close code -> frames it ended


@dataclass
class Results:
    classes: dict[str, ClassStats] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    rate_limited_ok: int = 0
    reconnects: int = 0
    unexpected_closes: int = 0
    max_failures: int = 200

    def of(self, cls: str) -> ClassStats:
        return self.classes.setdefault(cls, ClassStats())

    def fail(self, kind: str, cls: str, name: str, expect: Expect | None, got: str, conn: int) -> None:
        if len(self.failures) < self.max_failures:
            self.failures.append({"kind": kind, "class": cls, "case": name, "connection": conn,
                                  "expected": expect.describe() if expect else None, "got": got[:400]})


@dataclass
class Pending:
    cls: str
    name: str
    frame: Frame
    deadline: float
    rate_ok: bool
    progress: int = 0


def check_message(err: dict[str, Any]) -> str | None:
    """Why an error's text is not the server's own short text, or None."""
    message = err.get("message")
    if not isinstance(message, str) or not message:
        return "no message"
    for marker in LEAK_MARKERS:
        if marker in message:
            return f"exception-looking text ({marker!r})"
    if FILL * (MAX_QUOTE + 1) in message:
        return f"quotes more than {MAX_QUOTE} characters of the client's value"
    if len(message) > MAX_MESSAGE_CHARS:
        return f"a {len(message)}-character message"
    if not isinstance(err.get("type"), str) or not err["type"]:
        return "no error type"
    return None


class SimBucket:
    """This process's view of the key's message bucket (it cannot see other clients of the key)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.capacity = rate, burst
        self.tokens, self.stamp = burst, time.monotonic()

    async def refill(self, tokens: float) -> None:
        """Wait until the bucket holds ``tokens`` again (before a probe: its messages must not be refused)."""
        while True:
            now = time.monotonic()
            have = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            if have >= tokens:
                return
            await asyncio.sleep((tokens - have) / self.rate)

    def take(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        before = self.tokens
        self.tokens = max(0.0, self.tokens - 1)
        return before


class Connection:
    """One fuzzed session: sends its cases, matches the answers, probes, reopens after a close."""

    def __init__(self, index: int, args: argparse.Namespace, results: Results, bucket: SimBucket) -> None:
        self.index, self.args, self.results, self.bucket = index, args, results, bucket
        self.client = RealtimeClient(args.url, args.key)
        self.pending: deque[Pending] = deque()
        self.receiver: asyncio.Task | None = None
        self.last_cls = "connection"

    # --- the connection ------------------------------------------------------------------------------

    async def open(self) -> None:
        delay = 0.1
        for attempt in range(12):
            try:
                await self.client.connect()
                break
            except ConnectionLost:  # e.g. session_limit while the server releases the previous session
                await self.client.close()
                if attempt == 11:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        self.receiver = asyncio.ensure_future(self._receive())

    async def reopen(self) -> None:
        """After the connection closed: frames sent into the closing socket count as closed, then reconnect."""
        await self._stop_receiver(lost=True)
        await self.client.close()
        self.results.reconnects += 1
        await self.open()

    async def close(self) -> None:
        await self._stop_receiver()
        await self.client.close()

    async def _stop_receiver(self, *, lost: bool = False) -> None:
        """Stop reading answers; frames still waiting for one count as unanswered (``lost``: as closed)."""
        task, self.receiver = self.receiver, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()
        if lost:
            self.lost(count=False)
        self.expire(everything=True)

    def close_code(self) -> int:
        ws = self.client.ws
        code = ws.close_code if ws is not None else None
        return 1006 if code is None else code

    # --- receiving -----------------------------------------------------------------------------------

    async def _receive(self) -> None:
        while True:
            try:
                ev = await self.client.next_event(timeout=0.2)
            except asyncio.TimeoutError:
                self.expire()
                continue
            except ConnectionLost:
                self.lost()
                return
            self.match(ev.type, ev.data)
            self.expire()

    def expire(self, *, everything: bool = False) -> None:
        """Frames past their answer deadline (``everything``: all still waiting) count as unanswered."""
        now = time.monotonic()
        if not any(everything or p.deadline <= now for p in self.pending):
            return
        keep: deque[Pending] = deque()
        for p in self.pending:
            if everything or p.deadline <= now:
                self.results.of(p.cls).unanswered += 1
                self.results.fail("unanswered", p.cls, p.name, p.frame.expect,
                                  f"nothing within {self.args.answer_timeout} s", self.index)
            else:
                keep.append(p)
        self.pending = keep

    def lost(self, *, count: bool = True) -> None:
        """The connection closed (not a close this side asked for): the frames waiting for answers end with
        it. ``count``: a new close (not frames sent into the socket after the close was seen)."""
        code = self.close_code()
        if not count:
            while self.pending:
                p = self.pending.popleft()
                self.results.of(p.cls).closes[code] += 1
                self.results.fail("closed", p.cls, p.name, p.frame.expect, f"close {code} (sent into it)", self.index)
            return
        self.results.unexpected_closes += 1
        if not self.pending:
            self.results.of(self.last_cls).closes[code] += 1
            self.results.fail("closed", self.last_cls, "(no frame waiting)", None, f"close {code}", self.index)
        while self.pending:
            p = self.pending.popleft()
            self.results.of(p.cls).closes[code] += 1
            self.results.fail("closed", p.cls, p.name, p.frame.expect, f"close {code}", self.index)

    def match(self, etype: str, data: dict[str, Any]) -> None:
        """Attribute one server event to the frame it answers.

        The server answers a connection's frames in order, so: an ``error`` echoing an event_id answers the
        frame that carried it, and every frame sent before that one still waiting was skipped (unanswered).
        Any other event answers the oldest waiting frame; if that frame does not accept it but one of the
        next ``LOOKAHEAD`` does, the frames before that one were skipped. Otherwise the oldest frame got a
        wrong answer. (So one missing answer is one failure, not a cascade of them.)"""
        res = self.results
        err = (data.get("error") or {}) if etype == "error" else None
        if not self.pending:
            res.of("unsolicited").wrong += 1
            res.fail("wrong", "unsolicited", "(no frame waiting)", None, json.dumps(data)[:400], self.index)
            return
        eid = err.get("event_id") if err is not None else None
        index = None
        if eid is not None:
            index = next((i for i, p in enumerate(self.pending) if p.frame.event_id == eid), None)
            if index is None:
                res.of("unsolicited").wrong += 1
                res.fail("wrong", "unsolicited", f"(no frame with event_id {eid!r} waiting)", None,
                         json.dumps(data)[:400], self.index)
                return
        else:
            window = list(itertools.islice(self.pending, LOOKAHEAD))
            index = next((i for i, p in enumerate(window) if self.accepts(p, etype, err)), 0)
        for _ in range(index):
            skipped = self.pending.popleft()
            res.of(skipped.cls).unanswered += 1
            res.fail("unanswered", skipped.cls, skipped.name, skipped.frame.expect,
                     "skipped: a frame sent after it was answered first", self.index)
        target = self.pending[0]
        if err is None and self.accepts(target, etype, None):
            target.progress += 1
            if target.progress == len(target.frame.expect.success):
                self.pending.popleft()
                res.of(target.cls).documented += 1
            return
        self.pending.popleft()
        why = self.judge_error(target, err) if err is not None else f"event {etype}"
        if why is None:
            res.of(target.cls).documented += 1
            if err.get("code") == "rate_limit_exceeded":
                res.rate_limited_ok += 1
        else:
            res.of(target.cls).wrong += 1
            detail = f"{why}: {json.dumps(err)}" if err is not None else why
            res.fail("wrong", target.cls, target.name, target.frame.expect, detail, self.index)

    def accepts(self, p: Pending, etype: str, err: dict[str, Any] | None) -> bool:
        if err is not None:
            return self.judge_error(p, err) is None
        want = p.frame.expect.success
        return p.progress < len(want) and want[p.progress] == etype

    def judge_error(self, p: Pending, err: dict[str, Any]) -> str | None:
        """None when ``err`` is a documented answer to ``p``'s frame, else why not."""
        expect = p.frame.expect
        leak = check_message(err)
        if leak is not None:
            return leak
        code = err.get("code")
        if code == "rate_limit_exceeded" and p.rate_ok:
            return None
        if code not in expect.codes:
            return f"code {code!r}"
        if expect.echo is not None and err.get("event_id") != expect.echo:
            return "event_id not echoed"
        if expect.param is not None and not str(err.get("param") or "").startswith(expect.param):
            return f"param {err.get('param')!r}"
        return None

    # --- sending -------------------------------------------------------------------------------------

    async def send(self, cls: str, name: str, frame: Frame) -> None:
        before = self.bucket.take()
        # rate_limit_exceeded is a documented answer only when this fuzzer itself went over the key's rate
        pending = Pending(cls, name, frame, time.monotonic() + self.args.answer_timeout,
                          rate_ok=before < 0.1 * self.args.key_burst)
        self.pending.append(pending)
        self.last_cls = cls
        self.results.of(cls).sent += 1
        await self.client.ws.send(frame.data, text=True if frame.text_bytes else None)

    async def drain(self) -> None:
        """Wait until every frame sent has its answer (or has timed out)."""
        deadline = time.monotonic() + self.args.answer_timeout + 2
        while self.pending and self.receiver is not None and not self.receiver.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def run_burst(self, cases: Iterator[Case], quota: int, interval: float, start: float,
                        stop_at: float) -> int:
        """Send cases, one frame every ``interval`` s from ``start`` on (never faster, also after a pause),
        until ``quota`` frames are out or ``stop_at``; then wait for their answers. Returns the frames sent."""
        from websockets.exceptions import ConnectionClosed

        sent, due = 0, start
        while sent < quota and time.monotonic() < stop_at:
            case = next(cases)
            if case.closes:
                await self.expected_close(case)
                sent += len(case.frames)
                due = time.monotonic()
                continue
            for frame in case.frames:
                if self.receiver is None or self.receiver.done():
                    await self.reopen()
                while len(self.pending) >= MAX_IN_FLIGHT and not self.receiver.done():
                    await asyncio.sleep(0.01)
                now = time.monotonic()
                if due > now:
                    await asyncio.sleep(due - now)
                due = max(due, time.monotonic() - interval) + interval
                try:
                    await self.send(case.cls, case.name, frame)
                except ConnectionClosed:
                    await asyncio.gather(self.receiver, return_exceptions=True)  # it counts the close
                sent += 1
        await self.drain()
        if self.receiver is None or self.receiver.done():
            await self.reopen()
        return sent

    async def expected_close(self, case: Case) -> None:
        """A frame the WebSocket layer must answer by closing: sent alone, the close code checked, reopened."""
        from websockets.exceptions import ConnectionClosed

        frame, = case.frames
        await self.drain()
        await self._stop_receiver()
        res, stats = self.results, self.results.of(case.cls)
        stats.sent += 1
        self.bucket.take()
        got: list[str] = []
        try:
            await asyncio.wait_for(self.client.ws.send(frame.data, text=True if frame.text_bytes else None), 30)
        except ConnectionClosed:
            pass  # the server may close while a big frame is still being written: the close code tells
        except asyncio.TimeoutError:
            got.append("the frame could not be written within 30 s")
        deadline = time.monotonic() + self.args.answer_timeout
        while True:
            try:
                ev = await self.client.next_event(timeout=max(0.01, deadline - time.monotonic()))
            except ConnectionLost:
                break
            except asyncio.TimeoutError:
                got.append("no close")
                break
            got.append(ev.type if ev.type != "error" else f"error {ev.error_code}")
        code = self.close_code() if "no close" not in got else None
        if code is not None:
            stats.closes[code] += 1
        if code == frame.expect.close and not got:
            stats.documented += 1
        elif code is None:
            stats.unanswered += 1
            res.fail("unanswered", case.cls, case.name, frame.expect, ", ".join(got), self.index)
        else:
            stats.wrong += 1
            res.fail("wrong", case.cls, case.name, frame.expect, f"close {code} after {got}", self.index)
        await self.client.close()
        self.results.reconnects += 1
        await self.open()

    # --- the probe -----------------------------------------------------------------------------------

    async def probe(self, burst: int) -> dict[str, Any]:
        """A normal text turn on this (fuzzed) session; the user item is deleted after, so that the fuzzer's
        valid ``response.create`` still has no user input to answer."""
        await self._stop_receiver()
        t0 = time.perf_counter()
        out: dict[str, Any] = {"burst": burst, "connection": self.index, "ok": False}
        try:
            for _ in range(3):
                self.bucket.take()
            await self.client.update_session(output_modalities=["text"], max_output_tokens=64)
            await self.client.send_text(PROBE_QUESTION)
            result = await self.client.collect_turn(timeout=self.args.probe_timeout)
            out.update(status=result.status, reply=result.reply[:120],
                       errors=[f"{e.error_code}: {e.data['error'].get('message')}" for e in result.errors])
            user = next((e.data["item"]["id"] for e in result.events if e.type == "conversation.item.added"
                         and e.data.get("item", {}).get("role") == "user"), None)
            if user is None:
                out["why"] = "no conversation.item.added for the user's message"
            else:
                self.bucket.take()
                await self.client.send({"type": "conversation.item.delete", "item_id": user})
                deleted = await self.client.wait_for("conversation.item.deleted", "error", timeout=10)
                if deleted.type != "conversation.item.deleted":
                    out["why"] = f"deleting the probe's item: {deleted.data}"
                else:
                    out["ok"] = result.status == "completed" and bool(result.reply.strip()) and not result.errors
        except (asyncio.TimeoutError, ConnectionLost, ValueError) as exc:
            out["why"] = f"{type(exc).__name__}: {exc}"
        out["seconds"] = round(time.perf_counter() - t0, 2)
        self.results.probes.append(out)
        if self.client.ws is None or self.client.ws.close_code is not None:
            await self.client.close()
            self.results.reconnects += 1
            await self.open()
        else:
            self.receiver = asyncio.ensure_future(self._receive())
        return out


# --- the run --------------------------------------------------------------------------------------

async def run(args: argparse.Namespace) -> dict[str, Any]:
    results = Results()
    bucket = SimBucket(args.key_rate, args.key_burst)
    conns = [Connection(i, args, results, bucket) for i in range(args.connections)]
    gens = [iter(Generator(str(args.seed), i, max_event_bytes=args.max_event_bytes,
                           max_frame_bytes=args.max_frame_bytes, with_closes=args.with_closes))
            for i in range(args.connections)]
    t_start = time.monotonic()
    stop_at = t_start + args.time_limit
    for c in conns:
        await c.open()
    sent_total, burst = 0, 0
    interval = args.connections / args.rate  # seconds between two frames of one connection
    timed_out = False
    try:
        while sent_total < args.events:
            size = min(args.probe_every, args.events - sent_total)
            quotas = [size // args.connections + (1 if i < size % args.connections else 0)
                      for i in range(args.connections)]
            t0 = time.monotonic()
            sent = await asyncio.gather(*(c.run_burst(g, q, interval, t0 + i * interval / args.connections, stop_at)
                                          for i, (c, g, q) in enumerate(zip(conns, gens, quotas))))
            sent_total += sum(sent)
            burst += 1
            await bucket.refill(min(args.key_burst, 10.0 * args.connections))
            probes = await asyncio.gather(*(c.probe(burst) for c in conns))
            done = sum(sent)
            print(f"burst {burst}: {done} frames in {time.monotonic() - t0:.1f} s, {sent_total}/{args.events}; "
                  f"probes {'ok' if all(p['ok'] for p in probes) else 'FAILED'}", file=sys.stderr, flush=True)
            if time.monotonic() >= stop_at:
                timed_out = sent_total < args.events
                break
    finally:
        for c, outcome in zip(conns, await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)):
            if isinstance(outcome, BaseException):
                print(f"connection {c.index}: closing failed: {outcome!r}", file=sys.stderr)
    return report(args, results, sent_total, time.monotonic() - t_start, timed_out)


def report(args: argparse.Namespace, results: Results, sent: int, seconds: float, timed_out: bool) -> dict[str, Any]:
    classes = {name: {"sent": s.sent, "documented": s.documented, "wrong": s.wrong, "unanswered": s.unanswered,
                      "closes": {str(k): v for k, v in sorted(s.closes.items())}}
               for name, s in sorted(results.classes.items())}
    expected_closes = {str(k) for k in (1007, 1009)}
    bad_closes = {name: {code: n for code, n in c["closes"].items()
                         if not (name == "protocol_close" and code in expected_closes)}
                  for name, c in classes.items()}
    problems = (sum(c["wrong"] + c["unanswered"] for c in classes.values())
                + sum(sum(v.values()) for v in bad_closes.values()))
    probes_ok = bool(results.probes) and all(p["ok"] for p in results.probes)
    ok = problems == 0 and probes_ok and not timed_out
    config = {k: v for k, v in vars(args).items() if k != "key"}
    return {"ok": ok, "config": config, "frames_sent": sent, "seconds": round(seconds, 1),
            "timed_out": timed_out, "classes": classes, "probes": results.probes,
            "rate_limited_as_documented": results.rate_limited_ok, "reconnects": results.reconnects,
            "unexpected_closes": results.unexpected_closes, "failures": results.failures}


def format_table(rep: dict[str, Any]) -> str:
    head = f"{'class':<18}{'sent':>7}{'documented':>12}{'wrong':>7}{'unanswered':>12}  closes (code: frames)"
    lines = [head, "-" * len(head)]
    tot = Counter()
    for name, c in rep["classes"].items():
        closes = ", ".join(f"{k}: {v}" for k, v in c["closes"].items()) or "-"
        lines.append(f"{name:<18}{c['sent']:>7}{c['documented']:>12}{c['wrong']:>7}{c['unanswered']:>12}  {closes}")
        for k in ("sent", "documented", "wrong", "unanswered"):
            tot[k] += c[k]
    lines.append("-" * len(head))
    lines.append(f"{'total':<18}{tot['sent']:>7}{tot['documented']:>12}{tot['wrong']:>7}{tot['unanswered']:>12}")
    probes = rep["probes"]
    ok = sum(p["ok"] for p in probes)
    secs = sorted(p["seconds"] for p in probes)
    lines.append(f"probe turns: {ok}/{len(probes)} completed"
                 + (f" (median {secs[len(secs) // 2]:.1f} s, max {secs[-1]:.1f} s)" if secs else ""))
    lines.append(f"{rep['frames_sent']} frames in {rep['seconds']} s over {rep['config']['connections']} connections; "
                 f"{rep['reconnects']} reconnects; verdict: {'OK' if rep['ok'] else 'FAILED'}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("SUB250_URL", "ws://127.0.0.1:8250/v1/realtime"))
    p.add_argument("--key", help="API key (default: $SUB250_API_KEY, else the local key `serve` created)")
    p.add_argument("--no-auth", action="store_true", help="send no key (a server started with --dev-no-auth)")
    p.add_argument("--events", type=int, default=10_000, help="frames to send in all")
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--rate", type=float, default=100.0, help="frames per second, all connections together")
    p.add_argument("--seed", default="1")
    p.add_argument("--probe-every", type=int, default=1000, help="frames between two rounds of probe turns")
    p.add_argument("--with-closes", action="store_true",
                   help="also send frames that must close the connection "
                        "(invalid UTF-8: 1007, over max_frame_bytes: 1009)")
    p.add_argument("--max-event-bytes", type=int, default=1 << 20, help="the server's SUB250_MAX_EVENT_BYTES")
    p.add_argument("--max-frame-bytes", type=int, default=16 << 20, help="the server's max_frame_bytes")
    p.add_argument("--key-rate", type=float, default=500.0,
                   help="the key's messages per second (SUB250_MESSAGES_PER_S)")
    p.add_argument("--key-burst", type=float, default=1000.0, help="the key's message burst")
    p.add_argument("--answer-timeout", type=float, default=10.0, help="seconds an answer may take")
    p.add_argument("--probe-timeout", type=float, default=120.0, help="seconds a probe turn may take")
    p.add_argument("--time-limit", type=float, default=0.0,
                   help="stop sending after this many seconds (default: events/rate x 2 + 600)")
    p.add_argument("--out", default="reports/fuzz.json")
    args = p.parse_args(argv)
    host = urlsplit(args.url).hostname
    if host not in LOOPBACK:
        p.error(f"--url must be a loopback address ({', '.join(sorted(LOOPBACK))}), not {host!r}")
    if args.events < 1 or args.connections < 1 or args.rate <= 0 or args.probe_every < 1:
        p.error("--events, --connections, --probe-every must be >= 1 and --rate > 0")
    if args.rate >= args.key_rate:
        print(f"warning: --rate {args.rate:g} is not under the key's {args.key_rate:g} messages/s: "
              "rate_limit_exceeded answers will count as wrong unless this fuzzer's own bucket ran low",
              file=sys.stderr)
    args.key = None if args.no_auth else args.key or default_key()
    if not args.time_limit:
        args.time_limit = args.events / args.rate * 2 + 600
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rep = asyncio.run(run(args))
    print(format_table(rep))
    for f in rep["failures"][:20]:
        print(f"  {f['kind']}: [{f['class']}] {f['case']}: expected {f['expected']}; got {f['got'][:200]}")
    for p in rep["probes"]:
        if not p["ok"]:
            print(f"  probe failed: {p}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=1, ensure_ascii=False, default=str))
    print(f"report: {out}")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
