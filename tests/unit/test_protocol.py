import base64
import json

import pytest

from app.protocol import ProtocolError, SessionConfig, error_event, parse_client_event, server_event


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
    ('{"type": "input_audio_buffer.append", "audio": "AAEC"}', "invalid_audio", "audio"),  # 3 bytes: not PCM16
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
