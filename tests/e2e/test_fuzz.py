"""The live fuzz script (scripts/fuzz.py), run as a program against the shared real server: a short seeded run
of every class of malformed and odd frame must get only the documented answers, the only closes are the
protocol ones it asked for (1007, 1009), and the fuzzed sessions still complete text turns."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engines
REPO = Path(__file__).resolve().parents[2]
TEST_KEY = "sk-sub250-test-0123456789"
#: The shared server's max_event_bytes (tests/conftest.py).
MAX_EVENT_BYTES = 256 * 1024
#: Seed 2 gives, in 2 x 200 frames, every class: 4 invalid-UTF-8 closes, one over-max-frame close, 2 events
#: over max_event_bytes (the mix is seeded per connection, so this does not depend on timing).
SEED = "2"


async def test_fuzz_script_gets_only_documented_answers(ws_url, tmp_path):
    out = tmp_path / "fuzz.json"
    # 2 connections (the test key allows 4 sessions), 150 frames/s (under the key's rate, 500/s)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "scripts" / "fuzz.py"), "--url", ws_url, "--key", TEST_KEY,
        "--events", "400", "--connections", "2", "--rate", "150", "--seed", SEED, "--probe-every", "200",
        "--with-closes", "--max-event-bytes", str(MAX_EVENT_BYTES), "--out", str(out),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 600)
    stdout, stderr = stdout.decode(), stderr.decode()
    assert proc.returncode == 0, stdout[-4000:] + stderr[-3000:]
    rep = json.loads(out.read_text())
    assert rep["ok"] and rep["frames_sent"] == 400 and not rep["timed_out"]
    classes = rep["classes"]
    assert {"invalid_json", "non_object", "deep_nesting", "huge_number", "non_finite", "wrong_type", "unknown_type",
            "missing_type", "bad_event_id", "binary", "oversized_event", "stateful", "valid_update", "valid_item",
            "protocol_close"} <= set(classes), sorted(classes)
    for name, c in classes.items():
        assert c["wrong"] == 0 and c["unanswered"] == 0 and c["documented"] == c["sent"], (name, c)
        if name == "protocol_close":
            assert c["closes"] == {"1007": 4, "1009": 1}, c
        else:
            assert not c["closes"], (name, c)
    assert rep["unexpected_closes"] == 0 and not rep["failures"]
    assert rep["rate_limited_as_documented"] == 0  # 150/s stays under the key's rate
    # a probe turn on each fuzzed session after each 200 frames: 2 rounds x 2 connections
    assert len(rep["probes"]) == 4 and all(p["ok"] for p in rep["probes"]), rep["probes"]
    assert "documented" in stdout and "verdict: OK" in stdout
