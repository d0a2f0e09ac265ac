"""scripts/bench/phone.py: Twilio's side of a call - TwiML read, μ-law both ways - and bench_phone's table."""

import numpy as np

from scripts.bench import phone


def turn(path: str, rnd: int, v2v: float, transcript: str = "how far from the wall") -> dict:
    return {"path": path, "round": rnd, "status": "completed", "kind": "synthetic",
            "reference": "How far from the wall?", "transcript": transcript,
            "latency": {"spans": {"ttft": 3.0}, "beside": {"voice_to_voice": v2v, "endpoint_delay": 500.0}}}


def test_the_table_has_a_row_per_path_and_round_with_its_own_figures():
    rows = [turn("twilio", 1, 700.0), turn("twilio", 1, 900.0), turn("sip", 1, 640.0), turn("websocket", 1, 500.0),
            turn("twilio", 2, 650.0), turn("sip", 2, 600.0), turn("websocket", 2, 520.0, "how far from the mall")]
    text, summary = phone.compare(rows, 2)
    lines = text.splitlines()
    assert len(lines) == 7 and lines[1].split()[:3] == ["twilio", "1", "2"]
    assert "800 / 890" in lines[1] and "0.0 %" in lines[1]
    assert lines[6].split()[:3] == ["websocket", "2", "1"] and "20.0 %" in lines[6]
    assert summary["twilio/1"]["spans"]["voice_to_voice"]["p50"] == 800.0


def test_twiml_and_mu_law_round_trip():
    twiml = phone.parse_twiml('<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="wss://h/s">'
                              '<Parameter name="sub250_token" value="1.ab" /></Stream></Connect></Response>')
    assert twiml == phone.Twiml("wss://h/s", {"sub250_token": "1.ab"})
    tone = (0.5 * np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000)).astype(np.float32)
    mu = phone.mu_law(tone, 8000)
    assert len(mu) == 8000 and np.abs(phone.pcm_of(mu) - tone).max() < 0.02  # μ-law's own step at this level
