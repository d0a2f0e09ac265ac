"""The soak report (intervals, totals, growth, table, plot) and the server probe's parsing, on hand-made
turns and samples with known answers."""

import pytest

from scripts.bench import soak
from scripts.bench.probe import http_base, metric_sum, parse_metrics, require_loopback, server_figures

START = 1_000_000.0


def turn(started: float, status: str = "completed", ttft: float | None = 100.0, v2v: float | None = 900.0) -> dict:
    lat = {"spans": {"ttft": ttft}, "beside": {"voice_to_voice": v2v}} if status == "completed" else None
    return {"started_at": START + started, "status": status, "latency": lat}


def sample(interval, t: float, rss_mib: float, fds: int, tasks: int, sessions: int) -> dict:
    return {"interval": interval, "t": t, "rss_bytes": rss_mib * (1 << 20), "open_fds": fds, "asyncio_tasks": tasks,
            "sessions_open": sessions}


TURNS = [turn(1, ttft=100), turn(5, ttft=300, v2v=1100), turn(12, ttft=200), turn(15, status="timeout"),
         turn(25, ttft=400), turn(31, ttft=500)]  # the last started after the end: counted in the last interval
TURNS[2]["errors"] = [{"type": "rate_limit_error", "code": "rate_limit_exceeded", "message": "slow down"}] * 2
SAMPLES = [sample("baseline", 0, 400, 30, 10, 0), sample(0, 10, 500, 50, 60, 2), sample(1, 20, 505, 50, 61, 2),
           sample(2, 30, 510, 52, 60, 2), sample("after", 33, 508, 30, 10, 0)]


def report() -> dict:
    rows = soak.interval_rows(TURNS, SAMPLES, start_wall=START, interval_s=10, count=3)
    return {"config": {"sessions": 2, "minutes": 0.5}, "intervals": rows, "totals": soak.totals(TURNS),
            "growth": soak.growth(rows, SAMPLES[0], SAMPLES[-1]), "samples": SAMPLES}


def test_turns_fall_in_the_interval_they_started_in():
    rows = report()["intervals"]
    assert [(r["sent"], r["completed"], r["failed"]) for r in rows] == [(2, 2, 0), (2, 1, 1), (2, 2, 0)]
    assert rows[0]["ttft_p50"] == 200.0 and rows[0]["ttft_p95"] == pytest.approx(290.0)
    assert rows[0]["v2v_p50"] == 1000.0
    assert rows[1]["ttft_p50"] == 200.0 and rows[2]["ttft_p50"] == 450.0
    assert [r["rss_bytes"] / (1 << 20) for r in rows] == [500, 505, 510]
    assert [r["t_end_s"] for r in rows] == [10, 20, 30]


def test_totals_count_lost_turns():
    t = report()["totals"]
    assert (t["sent"], t["completed"], t["lost"], t["failures"]) == (6, 5, 1, {"timeout": 1})
    assert t["errors"] == {"rate_limit_exceeded": 2}
    assert [r["errors"] for r in report()["intervals"]] == [{}, {"rate_limit_exceeded": 2}, {}]
    assert t["ttft_p50"] == 300.0


def test_growth_from_the_first_interval_and_what_is_left_after():
    g = report()["growth"]
    assert g["rss_pct"] == pytest.approx(2.0)  # 500 -> 510 MiB
    assert g["open_fds"] == 2 and g["asyncio_tasks"] == 0
    a = g["after_vs_baseline"]
    assert a["rss_bytes"] == 108 * (1 << 20) and a["open_fds"] == 0 and a["asyncio_tasks"] == 0
    assert a["sessions_open"] == 0


def test_the_heap_apart_from_mapped_files_and_threads():
    parts = [dict(s, rss_anon_bytes=(300 + i * 10) * (1 << 20), rss_file_bytes=(100 + i) * (1 << 20), threads=40 + i)
             for i, s in enumerate(SAMPLES)]
    rss = [(t, 500.0 * (1 << 20)) for t in (2, 4, 12, 14, 22, 24)]
    anon = [(2, 300.0 * (1 << 20)), (4, 302.0 * (1 << 20)), (12, 305.0 * (1 << 20)), (22, 306.0 * (1 << 20)),
            (24, 310.0 * (1 << 20))]
    rows = soak.interval_rows(TURNS, parts, start_wall=START, interval_s=10, count=3, rss_trace=rss, anon_trace=anon)
    assert [r["anon_median"] / (1 << 20) for r in rows] == [301, 305, 308]
    assert [r["threads"] for r in rows] == [41, 42, 43]
    g = soak.growth(rows, parts[0], parts[-1])
    assert g["anon_median_pct"] == pytest.approx(700 / 301)
    assert g["rss_file_pct"] == pytest.approx(200 / 101) and g["rss_file_bytes"] == 2 * (1 << 20)
    assert g["threads"] == 2 and g["after_vs_baseline"]["threads"] == 4
    table = soak.format_table({"intervals": rows, "totals": soak.totals(TURNS), "growth": g})
    assert "RssAnon, median) +2.3%" in table and "threads +2" in table


def test_proc_figures_read_the_parts_of_the_rss_and_the_threads():
    import os

    from scripts.bench.probe import proc_figures

    f = proc_figures(os.getpid())
    assert f["rss_bytes"] > 0 and 0 < f["rss_anon_bytes"] < f["rss_bytes"] and f["rss_file_bytes"] > 0
    assert f["threads"] >= 1 and f["open_fds"] >= 3


def test_a_missing_sample_leaves_its_row_without_figures():
    rows = soak.interval_rows(TURNS, SAMPLES[:2], start_wall=START, interval_s=10, count=3)
    assert rows[1]["rss_bytes"] is None and rows[2]["open_fds"] is None
    assert soak.growth(rows, SAMPLES[0], None)["rss_pct"] is None


def test_table_and_plot(tmp_path):
    r = report()
    table = soak.format_table(r)
    assert "5 completed of 6 sent, 1 lost" in table and "RSS +2.0%" in table and "sessions open +0" in table
    assert "{'rate_limit_exceeded': 2}" in table
    assert table.count("\n") >= 5
    png = soak.plot(r, tmp_path / "soak.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


METRICS = """# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.048576e+08
process_open_fds 42.0
sub250_asyncio_tasks 17.0
sub250_sessions_open{transport="websocket"} 3.0
sub250_sessions_open{transport="webrtc"} 1.0
# TYPE sub250_outbox_dropped_audio_total counter
sub250_outbox_dropped_audio_total 12.0
# TYPE sub250_slow_client_closes_total counter
sub250_slow_client_closes_total{reason="outbox_full"} 1.0
sub250_slow_client_closes_total{reason="ping_timeout"} 2.0
"""


def test_the_probe_reads_the_process_gauges_from_metrics_text():
    m = parse_metrics(METRICS)
    assert m['sub250_sessions_open{transport="webrtc"}'] == 1.0
    assert metric_sum(m, "sub250_sessions_open") == 4.0 and metric_sum(m, "nope") is None
    f = server_figures(m)
    assert f["rss_bytes"] == 100 * (1 << 20) and f["open_fds"] == 42 and f["asyncio_tasks"] == 17
    assert f["sessions_open"] == 4 and f["dropped_audio"] == 12
    assert (f["slow_closes"], f["slow_closes_outbox_full"], f["slow_closes_ping_timeout"]) == (3, 1, 2)


def test_load_goes_to_this_machine_only():
    for url in ("ws://127.0.0.1:8250/v1/realtime", "ws://localhost:1/x", "ws://[::1]:8250/v1/realtime",
                "ws://127.0.0.2:9/"):
        require_loopback(url)
    for url in ("ws://10.0.0.1:8250/v1/realtime", "ws://example.com/v1/realtime", "wss://0.0.0.0:1/"):
        with pytest.raises(SystemExit):
            require_loopback(url)
    assert http_base("ws://127.0.0.1:8250/v1/realtime") == "http://127.0.0.1:8250"


def test_the_rss_trace_gives_each_interval_its_median_and_highest_and_their_growth():
    mb = 1 << 20
    trace = [(1, 500 * mb), (4, 700 * mb), (8, 520 * mb), (12, 510 * mb), (25, 530 * mb), (28, 560 * mb),
             (29, 525 * mb)]
    rows = soak.interval_rows(TURNS, SAMPLES, start_wall=START, interval_s=10, count=3, rss_trace=trace)
    assert [(r["rss_median"], r["rss_max"]) for r in rows] == [(520 * mb, 700 * mb), (510 * mb, 510 * mb),
                                                               (530 * mb, 560 * mb)]
    g = soak.growth(rows, SAMPLES[0], SAMPLES[-1])
    assert g["rss_median_pct"] == pytest.approx(10 / 520 * 100) and g["rss_max_pct"] == pytest.approx(-20.0)
    table = soak.format_table({"intervals": rows, "totals": soak.totals(TURNS), "growth": g})
    assert "median +1.9%, highest -20.0%" in table
    assert soak.growth(soak.interval_rows(TURNS, SAMPLES, start_wall=START, interval_s=10, count=3),
                       SAMPLES[0], SAMPLES[-1])["rss_max_pct"] is None  # no trace, no figure
