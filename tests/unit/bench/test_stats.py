"""Summary statistics of the replay benchmark, on a hand-made fixture with known answers."""

from pathlib import Path

import pytest

from scripts.bench.replay import read_jsonl
from scripts.bench.stats import format_table, summarize

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "replay_fixture.jsonl"


@pytest.fixture
def summary():
    return summarize(read_jsonl(FIXTURE))


def test_counts_and_failures(summary):
    assert summary["turns"] == 4 and summary["completed"] == 3 and summary["failed"] == 1
    assert summary["failures"] == {"timeout": 1}


def test_percentiles_of_spans(summary):
    ttft = summary["spans"]["ttft"]
    assert ttft["n"] == 3 and ttft["p50"] == 200.0
    assert ttft["p95"] == pytest.approx(290.0)  # linear interpolation between 200 and 300
    assert ttft["p99"] == pytest.approx(298.0)
    assert summary["spans"]["ttft_client"]["p50"] == 210.0
    assert summary["spans"]["prefill"]["p50"] == 140.0


def test_budget_share_and_most_frequent_stage(summary):
    assert summary["met_budget_share"] == pytest.approx(2 / 3)
    assert summary["most_often_over"] in ("asr_finalize", "prefill")
    assert summary["over_budget_by_stage"] == {"asr_finalize": 2, "prefill": 2, "ttft": 1}


def test_wer_per_kind(summary):
    assert summary["wer"]["synthetic"] == 0.0
    assert summary["wer"]["real"] == pytest.approx(1 / 9)  # one deletion ("not") in nine words
    assert summary["wer"]["all"] == pytest.approx(1 / 22)  # 7 + 6 + 9 reference words


def test_client_and_server_clocks_compared(summary):
    c = summary["clock_agreement"]
    assert c["ttft_client_abs_diff_p50"] == pytest.approx(4.0)  # |112-110|, |214-210|, |306-310|
    assert c["voice_to_voice_abs_diff_p50"] == pytest.approx(5.0)
    assert c["network_rtt_p50"] == 10.0


def test_table_mentions_every_figure(summary):
    table = format_table(summary, "t")
    for word in ("ttft", "p95", "met the 250 ms budget: 67%", "WER", "client vs server clocks", "1 failed"):
        assert word in table
