"""The soak script against the real server, shortened to a smoke test: 2 sessions for 30 s, sampled every
10 s -> per-interval samples, no lost turns, JSON + table + PNG. (The real soak, 8 sessions for 10 min, is
run by hand: scripts/soak.py --help.)"""

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engines
REPO = Path(__file__).resolve().parents[2]
TEST_KEY = "sk-sub250-test-0123456789"


async def test_soak_script_samples_each_interval_and_loses_no_turn(ws_url, small_corpus, tmp_path):
    out = tmp_path / "soak"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "scripts" / "soak.py"), "--url", ws_url, "--key", TEST_KEY,
        "--pid", str(os.getpid()),  # the fixture server runs in this process
        "--corpus", str(small_corpus), "--sessions", "2", "--minutes", "0.5", "--sample-s", "10",
        "--out", str(out), cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 300)
    stdout, stderr = stdout.decode(), stderr.decode()
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    print("\n" + stdout)  # the table (seen with -s)
    report = json.loads((out / "soak.json").read_text())
    rows = report["intervals"]
    assert [r["t_end_s"] for r in rows] == [10, 20, 30]
    for r in rows:  # every interval has its server sample
        assert r["rss_bytes"] > 100 << 20 and r["open_fds"] > 0
        assert r["asyncio_tasks"] > 0 and r["sessions_open"] >= 2  # the soak's sessions are open
    assert sum(r["sent"] for r in rows) >= 4 and rows[0]["completed"] >= 1
    totals = report["totals"]
    assert totals["lost"] == 0 and totals["completed"] == totals["sent"] > 0, totals
    assert totals["ttft_p50"] > 0 and totals["v2v_p50"] > 0
    assert report["growth"]["rss_pct"] is not None
    after = report["growth"]["after_vs_baseline"]
    assert after["sessions_open"] <= 0, after  # every soak session closed on the server too
    assert [s["interval"] for s in report["samples"]] == ["baseline", 0, 1, 2, "after"]
    assert all(s["source"] == "proc" for s in report["samples"])
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert len(turns) == totals["sent"]
    assert "completed of" in stdout and "RSS" in stdout and (out / "table.txt").exists()
    assert (out / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ttft p50" in stderr  # progress at each sample
