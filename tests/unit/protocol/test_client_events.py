import base64
import json

import pytest

from sub250.protocol import (
    MAX_AUDIO_END_MS,
    MAX_CONTENT_PARTS,
    MAX_DEPTH,
    MAX_OUTPUT_TOKENS,
    MAX_TEXT_BYTES,
    MessageItem,
    ProtocolError,
    ResponseOptions,
    SessionConfig,
    TextPart,
    error_event,
    parse_client_event,
    server_event,
)
from sub250.protocol.client_events import json_depth


def parse(obj):
    return parse_client_event(json.dumps(obj))


@pytest.mark.parametrize("raw,code,param", [
    ("{not json", "invalid_json", None),
    ("[1, 2]", "invalid_event", None),
    ('{"event_id": "e1"}', "missing_type", "type"),
    ('{"type": "session.frobnicate"}', "unknown_event_type", "type"),
    ('{"type": "input_audio_buffer.append"}', "invalid_value", "audio"),
    ('{"type": "input_audio_buffer.append", "audio": "@@@"}', "invalid_audio", "audio"),
    ('{"type": "input_audio_buffer.append", "audio": ""}', "invalid_audio", "audio"),
])
def test_bad_frames_give_codes(raw, code, param):
    with pytest.raises(ProtocolError) as err:
        parse_client_event(raw)
    assert err.value.code == code
    assert err.value.param == param


def test_append_decodes_audio_and_keeps_event_id():
    pcm = b"\x01\x00" * 480
    ev = parse({"type": "input_audio_buffer.append", "event_id": "ev_1", "audio": base64.b64encode(pcm).decode()})
    assert ev.audio == pcm and ev.event_id == "ev_1"


def test_item_create_validation():
    ok = parse({"type": "conversation.item.create",
                "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}})
    assert ok.data["item"]["role"] == "user"
    with pytest.raises(ProtocolError) as err:
        parse({"type": "conversation.item.create", "item": {"type": "message", "role": "robot", "content": []}})
    assert err.value.param == "item.role"
    with pytest.raises(ProtocolError) as err:
        parse({"type": "conversation.item.create",
               "item": {"type": "message", "role": "user", "content": [{"type": "input_image"}]}})
    assert err.value.code == "unsupported_content"


def test_truncate_needs_nonnegative_end():
    with pytest.raises(ProtocolError):
        parse({"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": -1})


def test_error_event_shape():
    ev = error_event(ProtocolError("invalid_json", "bad", param="x", event_id="e9"))
    assert ev["type"] == "error" and ev["event_id"].startswith("event_")
    assert ev["error"] == {"type": "invalid_request_error", "code": "invalid_json", "message": "bad",
                           "param": "x", "event_id": "e9"}


def test_session_update_applies_and_validates():
    cfg = SessionConfig(id="s")
    new = cfg.updated({"type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"],
                       "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 300}}}})
    assert new.instructions == "Be brief." and new.output_modalities == ("text",)
    assert new.turn_detection.silence_duration_ms == 300
    assert cfg.updated({"audio": {"input": {"turn_detection": None}}}).turn_detection is None
    wire = new.to_wire()
    assert wire["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    with pytest.raises(ProtocolError) as err:
        cfg.updated({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}})
    assert err.value.code == "unsupported_audio_format" and err.value.param == "session.audio.input.format.rate"
    with pytest.raises(ProtocolError):
        cfg.updated({"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 3}}}})
    with pytest.raises(ProtocolError):
        cfg.updated({"max_output_tokens": 0})


def test_server_events_have_unique_ids():
    a, b = server_event("x"), server_event("x")
    assert a["event_id"] != b["event_id"]


# --- bounded JSON (reproducers: each raised inside the server and closed the connection with 1011) -------

def error_of(raw):
    with pytest.raises(ProtocolError) as err:
        parse_client_event(raw)
    return err.value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 990, 5000, 200_000])
def test_deep_nesting_is_refused_before_parsing(depth):
    assert error_of("[" * depth + "]" * depth).code == "invalid_json"
    assert error_of('{"type": "session.update", "session": ' + "[" * depth + "]" * depth + "}").code == "invalid_json"
    assert error_of('{"a":' * depth + "1" + "}" * depth).code == "invalid_json"
    assert error_of("[" * depth).code == "invalid_json"  # unterminated: the decoder would recurse before failing


def test_nesting_up_to_the_limit_is_fine_and_brackets_in_strings_do_not_count():
    inner = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)  # the event and its session are 2 levels
    ev = parse_client_event('{"type": "session.update", "session": {"x": ' + inner + "}}")
    assert ev.type == "session.update"
    with pytest.raises(ProtocolError):
        parse_client_event('{"type": "session.update", "session": {"x": [' + inner + "]}}")
    text = "[{" * 5000 + '\\"' + "]}" * 10
    ev = parse({"type": "conversation.item.create",
                "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
    assert ev.item.text == text


def test_json_depth_is_exact_over_the_limit_and_respects_escapes():
    assert json_depth("[" * 40 + "]" * 40) == 40
    assert json_depth('["\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]') <= MAX_DEPTH
    assert json_depth('["\\\\"' + "[" * 40 + "]" * 40 + "]") == 41  # an escaped backslash ends the string
    assert json_depth('"unterminated ' + "[" * 40) <= MAX_DEPTH  # invalid anyway; no quadratic rescan
    assert json_depth('\\"' * 50_000 + "[" * 33) >= 0


@pytest.mark.parametrize("raw", [
    '{"type": "input_audio_buffer.commit", "event_id": ' + "9" * 5000 + "}",
    '{"type": "input_audio_buffer.commit", "x": -' + "1" * 4301 + "}",
    '{"type": "input_audio_buffer.commit", "x": 9007199254740993}',
    '{"type": "input_audio_buffer.commit", "x": 1e400}',
    '{"type": "input_audio_buffer.commit", "x": -1' + "0" * 400 + '.0}',
])
def test_huge_numbers_are_refused(raw):
    err = error_of(raw)
    assert err.code == "invalid_value" and ("2**53" in err.message or "double" in err.message)


@pytest.mark.parametrize("const", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(const):
    assert error_of('{"type": "input_audio_buffer.commit", "x": %s}' % const).code == "invalid_json"


def test_largest_exact_integer_is_fine():
    ev = parse({"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": 5,
                "x": 2**53, "y": -2**53})
    assert ev.audio_end_ms == 5


@pytest.mark.parametrize("raw,where", [
    ('{"type": "x",', 13), ("{not json", 1), ("", 0), ('{"a": 1} 2', 9),
])
def test_json_errors_are_our_words(raw, where):
    err = error_of(raw)
    assert err.code == "invalid_json"
    assert err.message == f"the message is not valid JSON (at character {where})"


def test_bytes_frames():
    assert parse_client_event(b'{"type": "input_audio_buffer.clear"}').type == "input_audio_buffer.clear"
    err = error_of(b'{"type": "\xff"}')
    assert err.code == "invalid_json" and err.message == "the message is not valid UTF-8 (at byte 10)"


def test_event_id_must_be_a_short_string():
    assert parse({"type": "input_audio_buffer.clear", "event_id": None}).event_id is None
    for bad in (5, ["e"], "", "e" * 65):
        err = error_of(json.dumps({"type": "input_audio_buffer.clear", "event_id": bad}))
        assert err.code == "invalid_value" and err.param == "event_id" and err.event_id is None


def test_unknown_type_message_is_bounded():
    err = error_of(json.dumps({"type": "x" * 100_000}))
    assert err.code == "unknown_event_type" and len(err.message) < 100


# --- conversation.item.truncate / delete, response.cancel ----------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("audio_end_ms", 10**15), ("audio_end_ms", MAX_AUDIO_END_MS + 1), ("audio_end_ms", 1.5), ("audio_end_ms", True),
    ("audio_end_ms", "10"), ("content_index", -1), ("content_index", MAX_CONTENT_PARTS), ("content_index", None),
    ("item_id", 7), ("item_id", ""), ("item_id", "i" * 65), ("item_id", None),
])
def test_truncate_fields_are_bounded(field, value):
    ev = {"type": "conversation.item.truncate", "item_id": "item_1", "content_index": 0, "audio_end_ms": 1500}
    ev[field] = value
    err = error_of(json.dumps(ev))
    assert err.code == "invalid_value" and err.param == field


def test_truncate_gives_typed_fields():
    ev = parse({"type": "conversation.item.truncate", "event_id": "e", "item_id": "item_1", "content_index": 0,
                "audio_end_ms": MAX_AUDIO_END_MS})
    assert (ev.item_id, ev.content_index, ev.audio_end_ms) == ("item_1", 0, MAX_AUDIO_END_MS)
    assert ev.data == {"item_id": "item_1", "content_index": 0, "audio_end_ms": MAX_AUDIO_END_MS}


def test_delete_and_cancel():
    assert parse({"type": "conversation.item.delete", "item_id": "it"}).item_id == "it"
    assert error_of('{"type": "conversation.item.delete", "item_id": {}}').param == "item_id"
    assert parse({"type": "response.cancel"}).response_id is None
    assert parse({"type": "response.cancel", "response_id": None}).response_id is None
    ev = parse({"type": "response.cancel", "response_id": "resp_1"})
    assert ev.response_id == "resp_1" and ev.data == {"response_id": "resp_1"}
    assert error_of('{"type": "response.cancel", "response_id": 3}').param == "response_id"


# --- conversation.item.create -------------------------------------------------------------------------

def message(**item):
    return {"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}], **item}}


def test_item_create_gives_a_typed_item():
    ev = parse({**message(id="item_7", status="completed"), "previous_item_id": "item_6"})
    assert ev.item == MessageItem("user", (TextPart("input_text", "hi"),), "item_7")
    assert ev.item.text == "hi" and ev.previous_item_id == "item_6"
    assert ev.data["item"] == {"type": "message", "role": "user", "id": "item_7",
                               "content": [{"type": "input_text", "text": "hi"}]}
    assert parse({**message(), "previous_item_id": None}).previous_item_id is None
    assert parse(message(id=None)).item.id is None


@pytest.mark.parametrize("patch,param,code", [
    ({"id": 5}, "item.id", "invalid_value"),
    ({"id": "x" * 65}, "item.id", "invalid_value"),
    ({"type": "item_reference"}, "item.type", "unsupported_item"),
    ({"type": ["message"]}, "item.type", "unsupported_item"),
    ({"role": ["user"]}, "item.role", "invalid_value"),
    ({"role": {"a": 1}}, "item.role", "invalid_value"),
    ({"content": "hi"}, "item.content", "invalid_value"),
    ({"content": [{"type": "input_text", "text": "a"}] * (MAX_CONTENT_PARTS + 1)}, "item.content", "invalid_value"),
    ({"content": [{"type": "input_text", "text": 5}]}, "item.content[0].text", "invalid_value"),
    ({"content": [{"type": "input_text", "text": "\ud800"}]}, "item.content[0].text", "invalid_value"),
    ({"content": [{"type": ["input_text"], "text": "a"}]}, "item.content[0].type", "unsupported_content"),
    ({"content": ["hi"]}, "item.content[0].type", "unsupported_content"),
    ({"content": [{"type": "input_text", "text": "a" * (MAX_TEXT_BYTES + 1)}]}, "item.content[0].text",
     "invalid_value"),
    ({"content": [{"type": "input_text", "text": "é" * (MAX_TEXT_BYTES // 2)},
                  {"type": "input_text", "text": "b"}]}, "item.content[1].text", "invalid_value"),
])
def test_item_create_is_fully_checked(patch, param, code):
    err = error_of(json.dumps(message(**patch)))
    assert (err.code, err.param) == (code, param)
    assert len(err.message) < 200


def item_event(item):
    return json.dumps({"type": "conversation.item.create", "event_id": "e2", "item": item})


def test_function_call_items_are_typed():
    from sub250.protocol.client_events import FunctionCallItem, FunctionCallOutputItem

    out = parse_client_event(item_event({"type": "function_call_output", "call_id": "call_1", "output": '{"ok":true}', "id": "i1"}))
    assert out.item == FunctionCallOutputItem("call_1", '{"ok":true}', "i1")
    assert out.data["item"] == {"type": "function_call_output", "call_id": "call_1", "output": '{"ok":true}', "id": "i1"}
    call = parse_client_event(item_event({"type": "function_call", "call_id": "call_2", "name": "lookup_order",
                             "arguments": '{"order_number":"7"}'}))
    assert call.item == FunctionCallItem("call_2", "lookup_order", '{"order_number":"7"}')


@pytest.mark.parametrize("item,param", [
    ({"type": "function_call_output", "output": "x"}, "item.call_id"),
    ({"type": "function_call_output", "call_id": 5, "output": "x"}, "item.call_id"),
    ({"type": "function_call_output", "call_id": "c"}, "item.output"),
    ({"type": "function_call_output", "call_id": "c", "output": {"ok": True}}, "item.output"),
    ({"type": "function_call_output", "call_id": "c", "output": "x" * (MAX_TEXT_BYTES + 1)}, "item.output"),
    ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "item.name"),
    ({"type": "function_call", "call_id": "c", "name": "no spaces allowed", "arguments": "{}"}, "item.name"),
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}, "item.arguments"),
])
def test_function_call_items_are_fully_checked(item, param):
    err = error_of(item_event(item))
    assert (err.code, err.param) == ("invalid_value", param) and len(err.message) < 200


def test_an_800_kb_item_is_refused():
    err = error_of(json.dumps(message(content=[{"type": "input_text", "text": "word " * 160_000}])))
    assert err.code == "invalid_value" and str(MAX_TEXT_BYTES) in err.message


def test_item_text_at_the_limit_is_fine():
    ev = parse(message(content=[{"type": "input_text", "text": "a" * (MAX_TEXT_BYTES - 1)},
                                {"type": "input_text", "text": "b"}]))
    assert len(ev.item.content) == 2


def test_previous_item_id_is_checked():
    assert error_of(json.dumps({**message(), "previous_item_id": 1})).param == "previous_item_id"


# --- response.create ----------------------------------------------------------------------------------

def response(**opts):
    return parse({"type": "response.create", "response": opts})


def response_error(**opts):
    return error_of(json.dumps({"type": "response.create", "event_id": "e1", "response": opts}))


def test_response_create_without_options():
    for ev in (parse({"type": "response.create"}), parse({"type": "response.create", "response": None})):
        assert ev.response is None and ev.data == {}


def test_response_options_are_typed():
    ev = response(instructions="Be brief.", output_modalities=["text"], max_output_tokens=50,
                  metadata={"k": "v"}, conversation="none")
    assert ev.response == ResponseOptions(instructions="Be brief.", output_modalities=("text",), max_output_tokens=50,
                                          metadata={"k": "v"}, conversation="none")
    assert ev.data["response"] == {"instructions": "Be brief.", "output_modalities": ("text",),
                                   "max_output_tokens": 50, "metadata": {"k": "v"}, "conversation": "none"}
    assert response().response == ResponseOptions()
    assert response(max_output_tokens="inf").response.max_output_tokens == MAX_OUTPUT_TOKENS == 4096
    assert response(instructions=None, max_output_tokens=None).response == ResponseOptions()


@pytest.mark.parametrize("field,value", [
    ("max_output_tokens", "abc"), ("max_output_tokens", [1]), ("max_output_tokens", -1),
    ("max_output_tokens", 1e9), ("max_output_tokens", 0), ("max_output_tokens", 4097), ("max_output_tokens", True),
    ("max_output_tokens", 5.0), ("max_output_tokens", "INF"),
    ("output_modalities", 5), ("output_modalities", ["video"]), ("output_modalities", "text"),
    ("output_modalities", []), ("output_modalities", [["audio"]]), ("output_modalities", [{"a": 1}]),
    ("instructions", 5), ("instructions", {}), ("instructions", "x" * (MAX_TEXT_BYTES + 1)),
    ("metadata", "k=v"), ("metadata", {"k": 1}), ("metadata", {f"k{i}": "v" for i in range(17)}),
    ("metadata", {"k" * 65: "v"}), ("metadata", {"k": "v" * 513}),
    ("conversation", 1), ("conversation", ""),
])
def test_response_options_are_validated_at_parse(field, value):
    err = response_error(**{field: value})
    assert err.code == "invalid_value" and err.param.startswith(f"response.{field}") and err.event_id == "e1"
    assert len(err.message) < 200


@pytest.mark.parametrize("field,value", [
    ("audio", {"output": {"voice": "marin"}}), ("input", []), ("prompt", {"id": "p"}), ("parallel_tool_calls", True),
    ("reasoning", {"effort": "low"}), ("frobnicate", [1, {"x": None}]),
])
def test_response_fields_we_do_not_implement_are_ignored(field, value):
    assert response(**{field: value}).response == ResponseOptions()


@pytest.mark.parametrize("field,value", [
    ("audio", "marin"), ("input", "hi"),
    ("input", [5]), ("prompt", "p"), ("parallel_tool_calls", "yes"), ("reasoning", []),
])
def test_response_fields_we_ignore_are_still_type_checked(field, value):
    assert response_error(**{field: value}).param.startswith(f"response.{field}")


def test_response_tools_are_typed():
    from sub250.protocol.tools import FunctionTool, ToolChoice

    opts = response(tools=[{"type": "function", "name": "lookup_order", "description": "Find an order.",
                            "parameters": {"type": "object", "properties": {"n": {"type": "string"}}}}],
                    tool_choice={"type": "function", "name": "lookup_order"}).response
    assert opts.tools == (FunctionTool("lookup_order", "Find an order.",
                                       '{"type":"object","properties":{"n":{"type":"string"}}}'),)
    assert opts.tools[0].parameters == {"type": "object", "properties": {"n": {"type": "string"}}}
    assert opts.tool_choice == ToolChoice("function", "lookup_order")
    assert response(tool_choice="required").response.tool_choice == ToolChoice("required")


@pytest.mark.parametrize("field,value,param", [
    ("tools", {"type": "function"}, "response.tools"), ("tools", [1], "response.tools[0]"),
    ("tools", [{"type": "function"}], "response.tools[0].name"),
    ("tools", [{"type": "function", "name": "has space"}], "response.tools[0].name"),
    ("tools", [{"type": "function", "name": "x" * 65}], "response.tools[0].name"),
    ("tools", [{"type": "mcp", "name": "f"}], "response.tools[0].type"),
    ("tools", [{"name": "f", "description": 5}], "response.tools[0].description"),
    ("tools", [{"name": "f", "parameters": "object"}], "response.tools[0].parameters"),
    ("tools", [{"name": "f", "parameters": {"type": "string"}}], "response.tools[0].parameters.type"),
    ("tools", [{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "bogus"}}}}],
     "response.tools[0].parameters"),
    ("tools", [{"name": "f", "parameters": {"type": "object", "required": "x"}}], "response.tools[0].parameters"),
    ("tools", [{"name": "f"}, {"name": "f"}], "response.tools"),
    ("tools", [{"name": f"f{i}"} for i in range(129)], "response.tools"),
    ("tool_choice", 3, "response.tool_choice"), ("tool_choice", "always", "response.tool_choice"),
    ("tool_choice", {"type": "function"}, "response.tool_choice.name"),
    ("tool_choice", {"type": "mcp", "server_label": "x"}, "response.tool_choice.type"),
])
def test_response_tools_are_validated(field, value, param):
    err = response_error(**{field: value})
    assert err.param == param and err.event_id == "e1" and len(err.message) < 240


def test_response_must_be_an_object():
    for bad in ([1], "x", 3):
        err = error_of(json.dumps({"type": "response.create", "response": bad}))
        assert err.code == "invalid_value" and err.param == "response"


def test_response_and_session_share_the_rules():
    cfg = SessionConfig()
    for field, value in (("max_output_tokens", "inf"), ("max_output_tokens", 7), ("output_modalities", ["text"]),
                         ("instructions", "x")):
        assert getattr(cfg.updated({field: value}), field) == getattr(response(**{field: value}).response, field)
    for field, value in (("max_output_tokens", "abc"), ("output_modalities", "text"), ("instructions", 5)):
        with pytest.raises(ProtocolError) as err:
            cfg.updated({field: value})
        assert err.value.message == response_error(**{field: value}).message
