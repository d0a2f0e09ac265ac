"""Property-based tests: whatever a client sends, parsing answers with a ClientEvent or a ProtocolError.

Deterministic (``derandomize=True``, no example database) so CI sees the same examples every run; the
example counts keep the whole file at a few seconds.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scripts.bench.frames import Raw, dumps
from sub250.protocol import (
    MAX_DEPTH,
    ClientEvent,
    MessageItem,
    ProtocolError,
    ResponseOptions,
    SessionConfig,
    TurnDetection,
    parse_client_event,
)
from sub250.protocol.client_events import CLIENT_EVENT_TYPES, FunctionCallItem, FunctionCallOutputItem, json_depth

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
QUICK = settings(FUZZ, max_examples=150)

CODES = {"invalid_json", "invalid_event", "missing_type", "unknown_event_type", "invalid_value", "invalid_audio",
         "unsupported_item", "unsupported_content", "unsupported_audio_format"}
#: The GA client event union (openai.types.realtime.RealtimeClientEvent) and ours, plus near misses.
EVENT_TYPES = ["session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
               "input_audio_buffer.clear", "conversation.item.create", "conversation.item.truncate",
               "conversation.item.delete", "conversation.item.retrieve", "output_audio_buffer.clear",
               "response.create", "response.cancel", "transcription_session.update", "session.updated", ""]


def check_error(err: ProtocolError) -> None:
    assert err.code in CODES, err.code
    assert isinstance(err.message, str) and 0 < len(err.message) <= 300
    assert "line 1 column" not in err.message and "Traceback" not in err.message
    assert err.param is None or isinstance(err.param, str) and len(err.param) <= 200
    assert err.event_id is None or isinstance(err.event_id, str) and len(err.event_id) <= 64


def parse_or_refuse(raw: str | bytes) -> ClientEvent | None:
    """The property itself: any other exception fails the test."""
    try:
        ev = parse_client_event(raw)
    except ProtocolError as err:
        check_error(err)
        event(f"refused: {err.code} {err.param}")
        return None
    event(f"parsed: {ev.type}")
    check_event(ev)
    return ev


def check_event(ev: ClientEvent) -> None:
    assert ev.type in CLIENT_EVENT_TYPES
    assert ev.event_id is None or isinstance(ev.event_id, str) and 1 <= len(ev.event_id) <= 64
    if ev.type == "input_audio_buffer.append":
        assert ev.audio  # its length is the session's to check, against its input format (test_session.py)
    if ev.type == "conversation.item.create" and isinstance(ev.item, FunctionCallOutputItem):
        assert isinstance(ev.item.output, str) and len(ev.item.output.encode("utf-8")) <= 32 * 1024
        assert isinstance(ev.item.call_id, str) and 1 <= len(ev.item.call_id) <= 64
    elif ev.type == "conversation.item.create" and isinstance(ev.item, FunctionCallItem):
        assert isinstance(ev.item.arguments, str) and isinstance(ev.item.name, str)
    elif ev.type == "conversation.item.create":
        assert isinstance(ev.item, MessageItem) and ev.item.role in ("user", "system", "assistant")
        assert all(isinstance(p.text, str) for p in ev.item.content) and 1 <= len(ev.item.content) <= 64
        assert len(ev.item.text.encode("utf-8")) <= 32 * 1024
    if ev.type == "conversation.item.truncate":
        assert isinstance(ev.content_index, int) and 0 <= ev.content_index < 64
        assert isinstance(ev.audio_end_ms, int) and 0 <= ev.audio_end_ms <= 86_400_000
    if ev.type in ("conversation.item.truncate", "conversation.item.delete", "conversation.item.retrieve"):
        assert isinstance(ev.item_id, str) and 1 <= len(ev.item_id) <= 64
    if ev.type == "response.create" and ev.response is not None:
        r = ev.response
        assert isinstance(r, ResponseOptions)
        assert r.instructions is None or isinstance(r.instructions, str)
        assert r.output_modalities is None or set(r.output_modalities) <= {"audio", "text"}
        assert r.max_output_tokens is None or type(r.max_output_tokens) is int and 1 <= r.max_output_tokens <= 4096
        assert r.metadata is None or all(isinstance(k, str) and isinstance(v, str) for k, v in r.metadata.items())
    if ev.type == "session.update":
        assert isinstance(ev.session, dict)
        updated_or_refused(ev.session)


def updated_or_refused(session: Any) -> None:
    try:
        cfg = SessionConfig(id="s").updated(session, "ev")
    except ProtocolError as err:
        check_error(err)
        event(f"session refused: {err.param}")
        return
    event("session updated")
    assert isinstance(cfg.instructions, str) and isinstance(cfg.voice, str) and len(cfg.voice) <= 64
    assert set(cfg.output_modalities) <= {"audio", "text"} and cfg.output_modalities
    assert type(cfg.max_output_tokens) is int and 1 <= cfg.max_output_tokens <= 4096
    assert cfg.turn_detection is None or isinstance(cfg.turn_detection, TurnDetection)
    if cfg.turn_detection is not None:
        assert 0 < cfg.turn_detection.threshold < 1 and math.isfinite(cfg.turn_detection.threshold)
    json.dumps(cfg.to_wire())  # what session.updated sends is always serializable


# --- strategies ---------------------------------------------------------------------------------------

big_ints = st.builds(lambda e, sign: sign * 10**e + 7, st.integers(15, 5000), st.sampled_from([1, -1]))
texts = st.text(st.characters(exclude_categories=()), max_size=20) | st.sampled_from(
    ['[', '{"', '\\', '"', "]}", "\ud800", "\udfff", "x" * 70])
#: Numbers JSON cannot carry exactly (refused for the whole frame): kept rare below, or nothing else is reached.
wild = big_ints | st.sampled_from([math.nan, math.inf, -math.inf, 1e308 * 10, 2**53 + 1])
safe_scalars = (st.none() | st.booleans() | st.integers(-(2**53), 2**53)
                | st.floats(allow_nan=False, allow_infinity=False) | texts)
#: Values valid somewhere in the API, to get past the first checks and into the nested ones.
interesting = st.sampled_from([
    None, True, False, 0, 1, -1, 2, 63, 64, 4096, 4097, 24000, 16000, 0.5, 1.0, 1e9, 2**53, -(2**53),
    "", "inf", "auto", "none", "audio", "text", "realtime", "server_vad", "semantic_vad", "audio/pcm",
    "audio/pcmu", "message", "function_call", "user", "system", "assistant", "input_text", "output_text",
    "input_audio", "item_1", "resp_1", "marin", "AAAA", "AAE=", ["audio"], ["text"], ["audio", "text"], ["video"],
    [], {}, [{}], {"id": "v"}, {"type": "audio/pcm"}, {"type": "audio/pcm", "rate": 24000},
])


def weighted(*choices: tuple[st.SearchStrategy, int]) -> st.SearchStrategy:
    """Each strategy drawn in proportion to its weight (``one_of`` would drop repeats and draw evenly)."""
    return st.sampled_from([s for s, w in choices for _ in range(w)]).flatmap(lambda s: s)


def often(common: st.SearchStrategy, rare: st.SearchStrategy, times: int = 4) -> st.SearchStrategy:
    return weighted((common, times), (rare, 1))


def json_of(scalars: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(texts, kids, max_size=4),
                        max_leaves=12)


json_values = json_of(safe_scalars | interesting)
#: Any JSON value, and beyond: 5000-digit integers, NaN, infinities.
any_values = json_of(often(safe_scalars | interesting, wild, 3))
leaf = weighted((interesting | safe_scalars, 24), (json_values, 6), (wild, 1))


def to_frame_value(value: Any) -> Any:
    """A Python value -> one ``dumps`` writes (huge ints and non-finite floats as raw JSON text)."""
    if isinstance(value, dict):
        return {k: to_frame_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_frame_value(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        return Raw(str(value) if value.bit_length() < 10_000 else "9" * 5000)
    if isinstance(value, float) and not math.isfinite(value):
        return Raw({math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, "NaN"))
    return value


def shaped(shape: Any) -> st.SearchStrategy:
    """Objects with the API's keys (from ``shape``), each value mostly of the right shape, else anything."""
    if isinstance(shape, dict):
        return often(st.fixed_dictionaries({}, optional={k: shaped(v) for k, v in shape.items()}), leaf)
    if isinstance(shape, list):
        return often(st.lists(shaped(shape[0]), max_size=3), leaf)
    if isinstance(shape, tuple):  # the values the API allows there
        return often(st.sampled_from(shape), leaf, 2)
    return leaf


LEAF = None
TURN_DETECTION = {"type": ("server_vad",), **{k: LEAF for k in ("threshold", "silence_duration_ms", "prefix_padding_ms",
                                    "create_response", "interrupt_response", "idle_timeout_ms", "eagerness")}}
FORMAT = {"type": ("audio/pcm",), "rate": (24000,)}
SESSION = {
    "type": ("realtime",), "instructions": LEAF, "output_modalities": LEAF, "max_output_tokens": LEAF, "model": LEAF,
    "tools": [{"type": LEAF, "name": LEAF}], "tool_choice": LEAF, "include": [LEAF], "tracing": LEAF,
    "truncation": LEAF, "prompt": {"id": LEAF}, "parallel_tool_calls": LEAF, "reasoning": {"effort": LEAF},
    "sub250": {"speculative_turns": LEAF, "interruption_check": LEAF, "grounding": LEAF},
    "audio": {"input": {"format": FORMAT, "turn_detection": TURN_DETECTION, "noise_reduction": {"type": LEAF},
                        "transcription": {"model": LEAF, "language": LEAF, "prompt": LEAF, "languages": [LEAF],
                                          "keywords": [LEAF], "delay": LEAF}},
              "output": {"format": FORMAT, "voice": {"id": LEAF}, "speed": LEAF}},
}
ITEM = {"type": ("message",), "role": ("user", "system", "assistant"), "id": LEAF, "status": LEAF, "object": LEAF,
        "content": [{"type": ("input_text", "text", "output_text"), "text": LEAF, "audio": LEAF, "transcript": LEAF}]}
RESPONSE = {"instructions": LEAF, "output_modalities": LEAF, "max_output_tokens": LEAF, "metadata": {"k": LEAF},
            "conversation": LEAF, "tools": [{"type": LEAF}], "tool_choice": LEAF, "audio": {"output": {"voice": LEAF}},
            "input": [ITEM], "prompt": {"id": LEAF}, "parallel_tool_calls": LEAF, "reasoning": LEAF}
audio_b64 = often(st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()), leaf)
#: The fields of each event type (the GA models' names); a frame gets some of them, plus a stray one.
FIELDS: dict[str, dict[str, st.SearchStrategy]] = {
    "session.update": {"session": shaped(SESSION)},
    "input_audio_buffer.append": {"audio": audio_b64},
    "conversation.item.create": {"item": shaped(ITEM), "previous_item_id": leaf},
    "conversation.item.truncate": {"item_id": often(st.just("item_1"), leaf, 2),
                                   "content_index": often(st.integers(-2, 70), leaf, 2),
                                   "audio_end_ms": often(st.integers(-5, 90_000_000), leaf, 2)},
    "conversation.item.delete": {"item_id": leaf},
    "response.create": {"response": shaped(RESPONSE)},
    "response.cancel": {"response_id": leaf},
}
event_ids = often(st.sampled_from(["ev_1", "e" * 64, "e" * 65]), leaf, 2)


def _event(etype: Any) -> st.SearchStrategy:
    fields = FIELDS.get(etype, {}) if isinstance(etype, str) else {}
    required = {"type": st.just(etype)}
    if fields:  # the event's own fields are usually there (the "type" alone is refused at once)
        required.update(fields)
    optional = {"event_id": event_ids, "x": leaf, **{k: v for t in FIELDS.values() for k, v in t.items()
                                                     if k not in fields}}
    strategy = st.fixed_dictionaries(required, optional=optional)
    return often(strategy, st.fixed_dictionaries({"type": st.just(etype)}, optional={**fields, **optional}), 3)


events = often(st.sampled_from(EVENT_TYPES), leaf, 6).flatmap(_event)


#: Valid examples of every event: the mutation strategy below breaks one or two of their fields at a time,
#: so the checks deep inside (turn_detection, content parts ...) are reached as often as the first ones.
VALID_EVENTS = [
    {"type": "session.update", "event_id": "ev_1", "session": {
        "type": "realtime", "instructions": "Be brief.", "output_modalities": ["audio"], "max_output_tokens": "inf",
        "model": "gpt-realtime", "tools": [{"type": "function", "name": "f"}], "tool_choice": "auto",
        "include": ["item.input_audio_transcription.logprobs"], "tracing": "auto", "truncation": "auto",
        "prompt": {"id": "p"}, "parallel_tool_calls": False, "reasoning": {"effort": "low"},
        "sub250": {"speculative_turns": True},
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": {"type": "near_field"},
                            "transcription": {"model": "whisper-1", "language": "en", "prompt": "p",
                                              "languages": ["en"], "keywords": ["k"], "delay": "low"},
                            "turn_detection": {"type": "server_vad", "threshold": 0.5, "silence_duration_ms": 500,
                                               "prefix_padding_ms": 300, "create_response": True,
                                               "interrupt_response": True, "idle_timeout_ms": 6000}},
                  "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin", "speed": 1.0}}}},
    {"type": "input_audio_buffer.append", "event_id": "ev_2", "audio": "AAAAAA=="},
    {"type": "input_audio_buffer.commit", "event_id": "ev_3"},
    {"type": "conversation.item.create", "event_id": "ev_4", "previous_item_id": "item_0", "item": {
        "type": "message", "role": "user", "id": "item_1", "status": "completed", "object": "realtime.item",
        "content": [{"type": "input_text", "text": "hi"}, {"type": "text", "text": "there"}]}},
    {"type": "conversation.item.truncate", "event_id": "ev_5", "item_id": "item_1", "content_index": 0,
     "audio_end_ms": 1500},
    {"type": "conversation.item.delete", "event_id": "ev_6", "item_id": "item_1"},
    {"type": "conversation.item.retrieve", "event_id": "ev_6r", "item_id": "item_1"},
    {"type": "conversation.item.create", "event_id": "ev_4f", "previous_item_id": "root", "item": {
        "type": "function_call_output", "call_id": "call_1", "output": "{\"status\": \"shipped\"}"}},
    {"type": "response.create", "event_id": "ev_7", "response": {
        "instructions": "Be brief.", "output_modalities": ["text"], "max_output_tokens": 50, "metadata": {"k": "v"},
        "conversation": "auto", "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {
            "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}],
        "tool_choice": {"type": "function", "name": "f"},
        "audio": {"output": {"voice": "marin"}}, "input": [{"type": "message"}], "prompt": {"id": "p"},
        "parallel_tool_calls": True, "reasoning": {"effort": "low"}}},
    {"type": "response.cancel", "event_id": "ev_8", "response_id": "resp_1"},
]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    return [_replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _broken(valid: dict[str, Any]) -> st.SearchStrategy:
    paths = [p for p in _paths(valid) if p != ("type",)]
    one = st.tuples(st.sampled_from(paths), leaf)
    return st.lists(one, min_size=1, max_size=2).map(lambda edits: _apply(valid, edits))


def _apply(valid: dict[str, Any], edits: list[tuple[tuple, Any]]) -> dict[str, Any]:
    out = valid
    for path, new in edits:
        if path in _paths(out) or len(path) == 1:
            out = _replaced(out, path, new)
    return out


#: Valid events with one or two fields (anywhere, however deep) replaced by any value.
broken_events = st.sampled_from(VALID_EVENTS).flatmap(_broken)


def nested(depth: int, inner: str, opener: str) -> str:
    if opener == "[":
        return "[" * depth + inner + "]" * depth
    return '{"a":' * depth + inner + "}" * depth


# --- properties ---------------------------------------------------------------------------------------

def test_valid_examples_parse():
    for example in VALID_EVENTS:
        ev = parse_client_event(json.dumps(example))
        assert ev.type == example["type"] and ev.event_id == example["event_id"]
        if ev.session is not None:
            SessionConfig().updated(ev.session)


@FUZZ
@given(events)
def test_event_shaped_frames_parse_or_refuse(event):
    parse_or_refuse(dumps(to_frame_value(event)))


@settings(FUZZ, max_examples=800)
@given(broken_events)
def test_events_with_broken_fields_parse_or_refuse(event):
    parse_or_refuse(dumps(to_frame_value(event)))
    if event["type"] == "session.update" and isinstance(event.get("session"), dict):
        updated_or_refused(event["session"])  # also straight from Python (huge ints, NaN)


@FUZZ
@given(any_values)
def test_any_json_value_parses_or_is_refused(value):
    parse_or_refuse(dumps(to_frame_value(value)))


@FUZZ
@given(shaped(SESSION))
def test_session_updated_never_crashes(session):
    # straight from Python: huge ints, NaN and infinities included (no JSON layer to stop them)
    updated_or_refused(session)


@QUICK
@given(st.integers(0, 3000), st.sampled_from(["[", "{"]), st.sampled_from(["1", '"x"', "", '"[\\"]"', "[]"]),
       st.booleans())
def test_any_nesting_parses_or_is_refused(depth, opener, inner, in_session):
    frame = nested(depth, inner, opener)
    if in_session:
        frame = '{"type": "session.update", "session": {"x": ' + frame + "}}"
    parse_or_refuse(frame)
    if depth > MAX_DEPTH:
        try:
            parse_client_event(frame)
        except ProtocolError as err:
            assert err.code == "invalid_json"
        else:
            raise AssertionError("nesting over the limit was accepted")


@QUICK
@given(any_values, st.integers(0, 60))
def test_depth_scan_matches_the_structure(value, extra):
    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        return 0

    text = "[" * extra + dumps(to_frame_value(value)) + "]" * extra
    want, got = extra + depth(value), json_depth(text)
    assert got == want if want > MAX_DEPTH else got <= MAX_DEPTH


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused(raw):
    parse_or_refuse(raw)


@FUZZ
@given(st.text(st.characters(exclude_categories=()), max_size=200))
def test_any_text_parses_or_is_refused(raw):
    parse_or_refuse(raw)


@FUZZ
@given(events, st.integers(0, 10_000), st.sampled_from(["", "\\", '"', "\udc80", "]", "}}", "\x00"]))
def test_truncated_and_corrupted_frames(event, cut, tail):
    frame = dumps(to_frame_value(event))
    parse_or_refuse(frame[:cut % (len(frame) + 1)] + tail)
    parse_or_refuse(frame.encode("utf-8", "surrogatepass")[:cut % (len(frame) + 1)])


# --- valid input keeps its values ---------------------------------------------------------------------

@QUICK
@given(st.fixed_dictionaries({}, optional={
    "instructions": st.text(max_size=50),
    "output_modalities": st.sampled_from([["audio"], ["text"]]),
    "max_output_tokens": st.integers(1, 4096) | st.just("inf"),
    "metadata": st.dictionaries(st.text(max_size=64), st.text(max_size=512), max_size=16),
    "conversation": st.sampled_from(["auto", "none", "conv_1"]),
}))
def test_valid_response_options_round_trip(opts):
    ev = parse_client_event(json.dumps({"type": "response.create", "response": opts}))
    want = dict(opts, output_modalities=tuple(opts["output_modalities"])) if "output_modalities" in opts else opts
    if want.get("max_output_tokens") == "inf":
        want = {**want, "max_output_tokens": 4096}
    assert ev.response == ResponseOptions(**want)


@QUICK
@given(st.text(min_size=1, max_size=64), st.integers(0, 63), st.integers(0, 86_400_000))
def test_valid_truncate_round_trips(item_id, index, end_ms):
    ev = parse_client_event(json.dumps({"type": "conversation.item.truncate", "item_id": item_id,
                                        "content_index": index, "audio_end_ms": end_ms}))
    assert (ev.item_id, ev.content_index, ev.audio_end_ms) == (item_id, index, end_ms)
