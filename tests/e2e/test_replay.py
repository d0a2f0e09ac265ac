"""The replay benchmark script against the real server: 2 sessions x 2 turns -> JSON, table, PNGs, HTML."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engines
REPO = Path(__file__).resolve().parents[2]
TEST_KEY = "sk-sub250-test-0123456789"


async def test_replay_script_writes_the_report(ws_url, small_corpus, tmp_path):
    out = tmp_path / "report"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "scripts" / "replay.py"), "--url", ws_url, "--key", TEST_KEY,
        "--corpus", str(small_corpus), "--sessions", "2", "--turns", "2", "--out", str(out),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 600)
    stdout, stderr = stdout.decode(), stderr.decode()
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    turns = [json.loads(l) for l in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 4 and {t["session"] for t in turns} == {0, 1}
    for t in turns:
        assert t["status"] == "completed" and t["latency"]["final"]
        assert t["transcript"] and t["reference"]
        assert t["client"]["voice_to_voice"] > 0 and t["client"]["ttft_client"] > 0
        assert 0 <= t["client"]["audio_stall"] < t["reply_audio_s"] * 1000 + 60_000  # measured, whatever it is
    summary = json.loads((out / "summary.json").read_text())
    assert summary["normal/N=2"]["completed"] == 4
    assert "p95" in stdout and "met the 250 ms budget" in stdout and "WER" in stdout
    assert "turns, ttft p50" in stderr  # progress while it runs
    for name in ("waterfall.png", "cdf.png", "report.html", "table.txt"):
        assert (out / name).stat().st_size > 1000, name
    assert (out / "waterfall.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "data:image/png;base64," in (out / "report.html").read_text()


async def test_replay_ctrl_c_writes_the_partial_report(ws_url, speak, tmp_path):
    import signal

    wav = speak("How often do I need to buy a new filter?")
    (tmp_path / "m.json").write_text(json.dumps([{"id": "f", "path": str(wav), "reference": "x"}]))
    out = tmp_path / "partial"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "scripts" / "replay.py"), "--url", ws_url, "--key", TEST_KEY,
        "--corpus", str(tmp_path / "m.json"), "--sessions", "1", "--turns", "50", "--out", str(out),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    # wait for the first finished turn, then press Ctrl-C
    while True:
        line = await asyncio.wait_for(proc.stderr.readline(), 300)
        assert line, "replay ended before its first turn"
        if b"turns, ttft p50" in line:
            break
    proc.send_signal(signal.SIGINT)
    stdout, _ = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 130
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert 1 <= len(turns) < 50
    assert (out / "report.html").exists() and "p50" in stdout.decode()
