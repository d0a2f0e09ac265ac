import json

import pytest

from sub250.protocol import MAX_OUTPUT_TOKENS, MAX_TEXT_BYTES, ProtocolError, SessionConfig, TurnDetection, parse_client_event
from sub250.protocol.tools import FunctionTool, ToolChoice


def refused(session, cfg=SessionConfig()):
    with pytest.raises(ProtocolError) as err:
        cfg.updated(session, "ev_9")
    assert err.value.event_id == "ev_9" and len(err.value.message) < 200
    return err.value


@pytest.mark.parametrize("part", ["input", "output"])
@pytest.mark.parametrize("value", ["pcm16", [1, 2], 7, True])
def test_audio_parts_must_be_objects(part, value):
    # reproducer: {"audio": {"input": "pcm16"}} raised AttributeError inside the session
    err = refused({"audio": {part: value}})
    assert err.code == "invalid_value" and err.param == f"session.audio.{part}"
    ev = parse_client_event(json.dumps({"type": "session.update", "session": {"audio": {part: value}}}))
    with pytest.raises(ProtocolError):
        SessionConfig().updated(ev.session, ev.event_id)


@pytest.mark.parametrize("session,param", [
    ("x", "session"), ([], "session"),
    ({"type": "translation"}, "session.type"),
    ({"audio": "x"}, "session.audio"),
    ({"audio": {"input": {"format": "audio/pcm"}}}, "session.audio.input.format.type"),
    ({"audio": {"input": {"format": {"type": "audio/pcm", "rate": [24000]}}}}, "session.audio.input.format.rate"),
    ({"audio": {"output": {"format": {"type": "audio/opus"}}}}, "session.audio.output.format.type"),
    ({"audio": {"output": {"format": {"type": 5}}}}, "session.audio.output.format.type"),
    ({"audio": {"input": {"format": {"type": "audio/pcmu", "rate": 24000}}}}, "session.audio.input.format.rate"),
    ({"audio": {"input": {"turn_detection": "server_vad"}}}, "session.audio.input.turn_detection"),
    ({"audio": {"input": {"turn_detection": {"type": "near_field_vad"}}}}, "session.audio.input.turn_detection.type"),
    ({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "fast"}}}},
     "session.audio.input.turn_detection.eagerness"),
    ({"audio": {"input": {"turn_detection": {"threshold": "0.5"}}}}, "session.audio.input.turn_detection.threshold"),
    ({"audio": {"input": {"turn_detection": {"threshold": 1.0}}}}, "session.audio.input.turn_detection.threshold"),
    ({"audio": {"input": {"turn_detection": {"silence_duration_ms": 99}}}},
     "session.audio.input.turn_detection.silence_duration_ms"),
    ({"audio": {"input": {"turn_detection": {"prefix_padding_ms": 1.5}}}},
     "session.audio.input.turn_detection.prefix_padding_ms"),
    ({"audio": {"input": {"turn_detection": {"create_response": 1}}}},
     "session.audio.input.turn_detection.create_response"),
    ({"audio": {"input": {"turn_detection": {"idle_timeout_ms": "5s"}}}},
     "session.audio.input.turn_detection.idle_timeout_ms"),
    ({"audio": {"input": {"transcription": "whisper"}}}, "session.audio.input.transcription"),
    ({"audio": {"input": {"transcription": {"model": 1}}}}, "session.audio.input.transcription.model"),
    ({"audio": {"input": {"noise_reduction": "near_field"}}}, "session.audio.input.noise_reduction"),
    ({"audio": {"output": {"voice": 5}}}, "session.audio.output.voice"),
    ({"audio": {"output": {"voice": "v" * 65}}}, "session.audio.output.voice"),
    ({"audio": {"output": {"voice": {"id": 3}}}}, "session.audio.output.voice.id"),
    ({"audio": {"output": {"speed": "fast"}}}, "session.audio.output.speed"),
    ({"instructions": 5}, "session.instructions"),
    ({"instructions": "x" * (MAX_TEXT_BYTES + 1)}, "session.instructions"),
    ({"instructions": "\udc00"}, "session.instructions"),
    ({"output_modalities": "audio"}, "session.output_modalities"),
    ({"max_output_tokens": 4097}, "session.max_output_tokens"),
    ({"max_output_tokens": 5.0}, "session.max_output_tokens"),
    ({"sub250": True}, "session.sub250"),
    ({"sub250": {"speculative_turns": "yes"}}, "session.sub250.speculative_turns"),
    ({"sub250": {"interruption_check": 1}}, "session.sub250.interruption_check"),
    ({"sub250": {"grounding": "off"}}, "session.sub250.grounding"),
    ({"tools": {"type": "function"}}, "session.tools"),
    ({"tools": ["f"]}, "session.tools[0]"),
    ({"tool_choice": 1}, "session.tool_choice"),
    ({"include": "item.input_audio_transcription.logprobs"}, "session.include"),
    ({"model": ["gpt"]}, "session.model"),
    ({"tracing": 5}, "session.tracing"),
    ({"truncation": []}, "session.truncation"),
    ({"prompt": "p"}, "session.prompt"),
    ({"parallel_tool_calls": "no"}, "session.parallel_tool_calls"),
])
def test_every_field_is_type_checked(session, param):
    assert refused(session).param == param


def test_tool_choice_must_name_a_tool():
    cfg = SessionConfig().updated({"tools": [{"name": "lookup_order"}]})
    assert cfg.updated({"tool_choice": {"type": "function", "name": "lookup_order"}}).tool_choice == \
        ToolChoice("function", "lookup_order")
    assert refused({"tool_choice": {"type": "function", "name": "other"}}).param == "session.tool_choice"
    with pytest.raises(ProtocolError) as err:  # dropping the tool a forced choice names is refused too
        cfg.updated({"tool_choice": {"type": "function", "name": "lookup_order"}}).updated({"tools": []})
    assert err.value.param == "session.tool_choice"


def test_the_keypad_tool_must_be_one_of_the_tools():
    """``sub250.keypad_tool``: what a phone caller keys in calls it (app/telephony/keypad.py)."""
    from sub250.telephony.keypad import keypad_tool

    cfg = SessionConfig().updated({"tools": [{"name": "lookup_order"}], "sub250": {"keypad_tool": "lookup_order"}})
    assert cfg.keypad_tool == "lookup_order" and keypad_tool(cfg) == "lookup_order"
    assert keypad_tool(cfg.updated({"tools": []})) == ""  # its tool gone: the model decides again
    assert cfg.updated({"sub250": {"keypad_tool": ""}}).keypad_tool == ""
    assert refused({"sub250": {"keypad_tool": "other"}}).param == "session.sub250.keypad_tool"
    assert refused({"sub250": {"keypad_tool": 5}}).param == "session.sub250.keypad_tool"
    assert keypad_tool(SessionConfig()) == ""


def test_valid_updates_keep_their_meaning():
    cfg = SessionConfig(id="s")
    new = cfg.updated({
        "type": "realtime", "model": "gpt-realtime", "instructions": "Be brief.", "output_modalities": ["text"],
        "max_output_tokens": 300, "tools": [{"type": "function", "name": "f"}], "tool_choice": "auto",
        "include": ["item.input_audio_transcription.logprobs"], "tracing": "auto", "truncation": "auto",
        "sub250": {"speculative_turns": True, "interruption_check": False, "grounding": False},
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": None,
                            "transcription": {"model": "whisper-1", "language": "en"},
                            "turn_detection": {"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 300,
                                               "prefix_padding_ms": 200, "create_response": False,
                                               "interrupt_response": False, "idle_timeout_ms": None}},
                  "output": {"format": {"type": "audio/pcm"}, "voice": "marin", "speed": 1.0}},
    })
    assert new == SessionConfig(
        id="s", instructions="Be brief.", output_modalities=("text",), max_output_tokens=300, voice="marin",
        speculative_turns=True, interruption_check=False, grounding=False, transcription=True, tools=(FunctionTool("f"),),
        include=("item.input_audio_transcription.logprobs",), turn_detection=TurnDetection(threshold=0.6, silence_duration_ms=300, prefix_padding_ms=200,
                                     create_response=False, interrupt_response=False))
    assert cfg.updated({}) == cfg
    assert new.to_wire()["tools"] == [{"type": "function", "name": "f", "description": "",
                                       "parameters": {"type": "object", "properties": {}}}]
    assert new.to_wire()["tool_choice"] == "auto"
    assert cfg.updated({"audio": {"input": {"transcription": None}}}).transcription is False
    assert cfg.updated({"audio": {"input": {"turn_detection": None}}}).turn_detection is None
    assert cfg.updated({"audio": {"output": {"voice": {"id": "voice_1"}}}}).voice == "voice_1"
    assert cfg.updated({"max_output_tokens": "inf"}).max_output_tokens == MAX_OUTPUT_TOKENS
    # null is "not given"; an empty or null audio part changes nothing
    assert cfg.updated({"instructions": None, "audio": {"input": None, "output": {}}, "sub250": None}) == cfg
    # turn_detection updates start from the current one
    a = cfg.updated({"audio": {"input": {"turn_detection": {"silence_duration_ms": 800}}}})
    assert a.updated({"audio": {"input": {"turn_detection": {"threshold": 0.3}}}}).turn_detection == TurnDetection(
        threshold=0.3, silence_duration_ms=800)


def test_include_asks_for_our_events_and_refuses_what_it_cannot_include():
    cfg = SessionConfig(id="s").updated({"include": ["sub250.latency", "sub250.sources", "sub250.latency"]})
    assert cfg.include == ("sub250.latency", "sub250.sources") and cfg.to_wire()["include"] == list(cfg.include)
    assert cfg.updated({"tracing": "auto"}).include == cfg.include  # kept when not given
    assert cfg.updated({"include": []}).include == ()  # replaced: GA events only
    assert cfg.updated({"include": None}).include == cfg.include
    err = refused({"include": ["sub250.latency", "sub250.everything"]})
    assert err.param == "session.include[1]" and "sub250.everything" in err.message and "sub250.sources" in err.message
    assert refused({"include": [5]}).param == "session.include[0]"


def test_g711_formats_are_taken_each_way_at_8_khz():
    from sub250.audio.formats import PCM_IN, PCMA, PCMU

    cfg = SessionConfig(id="s").updated({"audio": {"input": {"format": {"type": "audio/pcmu"}},
                                                   "output": {"format": {"type": "audio/pcma", "rate": 8000}}}})
    assert (cfg.input_format, cfg.output_format) == (PCMU, PCMA)
    wire = cfg.to_wire()["audio"]
    assert wire["input"]["format"] == {"type": "audio/pcmu"} and wire["output"]["format"] == {"type": "audio/pcma"}
    back = cfg.updated({"audio": {"input": {"format": {"type": "audio/pcm"}}}})
    assert back.input_format == PCM_IN and back.output_format == PCMA


def test_wire_form_is_unchanged():
    wire = SessionConfig(id="s").to_wire()
    assert wire["audio"]["input"]["format"] == wire["audio"]["output"]["format"] == {"type": "audio/pcm",
                                                                                     "rate": 24000}
    assert json.loads(json.dumps(wire)) == wire


def test_semantic_vad_round_trips_in_the_ga_shape():
    cfg = SessionConfig(id="s").updated({"audio": {"input": {"turn_detection": {
        "type": "semantic_vad", "eagerness": "low", "interrupt_response": False}}}})
    td = cfg.turn_detection
    assert (td.type, td.eagerness, td.interrupt_response) == ("semantic_vad", "low", False)
    assert td.to_wire() == {"type": "semantic_vad", "eagerness": "low", "create_response": True,
                            "interrupt_response": False}
    back = cfg.updated({"audio": {"input": {"turn_detection": {"type": "server_vad"}}}})
    assert back.turn_detection.to_wire()["type"] == "server_vad"


def test_the_transcription_prompt_is_kept_and_said_back():
    from sub250.protocol import SessionConfig

    c = SessionConfig().updated({"audio": {"input": {"transcription": {"model": "whisper-1", "prompt": "Halden Aero"}}}})
    assert c.transcription_prompt == "Halden Aero"
    assert c.to_wire()["audio"]["input"]["transcription"] == {"model": "whisper", "prompt": "Halden Aero"}
    assert SessionConfig().transcription_prompt is None  # the profile's
    assert "prompt" not in SessionConfig().to_wire()["audio"]["input"]["transcription"]
