"""Twilio Media Streams' messages (app/telephony/twilio_messages.py): Twilio's documented shapes parsed, anything
else refused with what was wrong, never trusted."""

import base64
import json

import pytest

from sub250.telephony import twilio_messages as tw

SID = "MZ" + "1" * 32
START = {"event": "start", "sequenceNumber": "1", "streamSid": SID, "start": {
    "accountSid": "AC" + "2" * 32, "streamSid": SID, "callSid": "CA" + "3" * 32, "tracks": ["inbound"],
    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    "customParameters": {"sub250_token": "123.abc"}}}


def frame(msg: dict) -> str:
    return json.dumps(msg)


def test_twilios_documented_messages_parse():
    start = tw.parse(frame(START))
    assert start == tw.Start(stream_sid=SID, call_sid="CA" + "3" * 32, account_sid="AC" + "2" * 32,
                             tracks=("inbound",), encoding="audio/x-mulaw", sample_rate=8000, channels=1,
                             parameters={"sub250_token": "123.abc"})
    assert tw.parse(frame({"event": "connected", "protocol": "Call", "version": "1.0.0"})) == tw.Connected("Call")
    payload = bytes(range(160))
    media = tw.parse(frame({"event": "media", "streamSid": SID, "media": {
        "track": "inbound", "chunk": "2", "timestamp": "20", "payload": base64.b64encode(payload).decode()}}))
    assert media == tw.Media(track="inbound", payload=payload)
    assert tw.parse(frame({"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": "#"}})) == tw.Dtmf("#")
    assert tw.parse(frame({"event": "mark", "mark": {"name": "resp_1.3"}})) == tw.Mark("resp_1.3")
    assert tw.parse(frame({"event": "stop", "stop": {"callSid": "CA1"}})) == tw.Stop("CA1")


@pytest.mark.parametrize("raw, why", [
    (b"\x00\x01", "binary"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not an object"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),  # deep nesting
    (frame({"event": "ringing"}), "unknown event"),
    (frame({"event": 7}), "unknown event 'int'"),
    (frame({"event": "media"}), "media must be an object"),
    (frame({"event": "media", "media": {"payload": "@@@"}}), "not base64"),
    (frame({"event": "media", "media": {"payload": 12}}), "payload must be a string"),
    (frame({"event": "dtmf", "dtmf": {"digit": "x"}}), "not a key"),
    (frame({"event": "mark", "mark": {"name": "n" * 1000}}), "over 256"),
    (frame({**START, "start": {**START["start"], "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": -1}}}),
     "sampleRate must be a positive"),
    (frame({**START, "start": {**START["start"], "customParameters": {"a": 1}}}), "customParameters"),
    (frame({**START, "start": {**START["start"], "tracks": "inbound"}}), "tracks must be a list"),
])
def test_anything_else_is_refused_with_what_was_wrong(raw, why):
    with pytest.raises(tw.StreamError, match=why):
        tw.parse(raw)


def test_the_messages_out_carry_the_stream():
    assert json.loads(tw.media(SID, b"\xff\x7f")) == {"event": "media", "streamSid": SID,
                                                      "media": {"payload": base64.b64encode(b"\xff\x7f").decode()}}
    assert json.loads(tw.mark(SID, "r.1")) == {"event": "mark", "streamSid": SID, "mark": {"name": "r.1"}}
    assert json.loads(tw.clear(SID)) == {"event": "clear", "streamSid": SID}
