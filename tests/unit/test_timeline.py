import pytest

from app.metrics.timeline import MARKS, TurnTimeline

MS = 1_000_000


def timeline(**ms) -> TurnTimeline:
    tl = TurnTimeline("t")
    for name, at in ms.items():
        tl.mark(name, int(at * MS))
    return tl


def test_spans_follow_latency_md():
    tl = timeline(speech_start=0, speech_end=1000, turn_commit=1500, asr_final=1520, retrieval_start=1520,
                  retrieval_end=1550, prompt_ready=1560, llm_submit=1561, first_token=1660, first_token_sent=1662,
                  first_audio=1900, first_audio_sent=1905, response_done=3000)
    tl.measured.update(network_rtt=20.0, gateway=0.5)
    tl.tokens = 31
    s = tl.spans()
    assert s["asr_finalize"] == 20 and s["retrieval"] == 30 and s["prompt"] == 10 and s["prefill"] == 99
    assert s["ttft"] == 162 and s["ttft_client"] == 182
    assert s["endpoint_delay"] == 500 and s["voice_to_voice"] == 905 and s["tts_first_audio"] == 240
    assert s["tokens_per_s"] == pytest.approx(30 / 1.34)
    meets, over = tl.verdict()
    assert meets is True and over == []


def test_over_budget_names_the_stages():
    tl = timeline(turn_commit=0, asr_final=300, retrieval_start=300, retrieval_end=310, prompt_ready=311,
                  llm_submit=311, first_token=500, first_token_sent=501)
    tl.measured["network_rtt"] = 60.0
    meets, over = tl.verdict()
    assert meets is False
    assert set(over) == {"asr_finalize", "prefill", "network_rtt", "ttft"}


def test_prompt_span_starts_at_the_later_of_asr_and_retrieval():
    tl = timeline(asr_final=100, retrieval_end=50, prompt_ready=130)
    assert tl.spans()["prompt"] == 30


def test_marks_are_set_once_and_unknown_marks_refused():
    tl = TurnTimeline("t")
    tl.mark("first_token", 5)
    tl.mark("first_token", 9)
    assert tl.marks["first_token"] == 5
    with pytest.raises(KeyError):
        tl.mark("made_up")


def test_report_is_relative_and_ordered():
    tl = timeline(turn_commit=1000, asr_final=1010, llm_submit=1020, first_token=1100, first_token_sent=1101,
                  response_done=1500)
    rep = tl.report(final=True)
    assert list(rep["marks"]) == ["turn_commit", "asr_final", "llm_submit", "first_token", "first_token_sent",
                                  "response_done"]
    assert rep["marks"]["turn_commit"] == 0 and rep["marks"]["first_token_sent"] == 101
    assert set(rep["spans"]) == {"network_rtt", "gateway", "asr_finalize", "retrieval", "prompt", "prefill",
                                 "ttft", "ttft_client"}
    assert all(m in MARKS for m in rep["marks"])
