import pytest

from sub250.metrics.timeline import MARKS, TurnTimeline

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


# --- rebase_to_commit: a speculative reply adopted at the commit ---------------------------------------


def test_rebase_moves_work_done_before_the_commit_off_the_critical_path():
    # held reply started at 1000; the commit comes at 1300, after ASR, retrieval and the prompt
    tl = timeline(speech_start=0, speech_end=900, asr_final=1100, retrieval_start=1100, retrieval_end=1130,
                  prompt_ready=1140, llm_submit=1141, turn_commit=1300)
    tl.rebase_to_commit(1300 * MS, 1000 * MS)
    assert tl.speculative is True
    assert tl.ahead == {"asr": 100.0, "prompt_ready": 140.0}
    assert tl.measured["retrieval_ahead"] == 30.0
    assert tl.marks["asr_final"] == 1300 * MS and tl.marks["prompt_ready"] == 1300 * MS
    assert not tl.has("retrieval_start") and not tl.has("retrieval_end")
    s = tl.spans()
    assert s["asr_finalize"] == 0 and s["prompt"] == 0 and s["retrieval"] is None
    assert s["retrieval_ahead"] == 30.0
    # the engine's work is not moved: it was submitted before the commit
    assert tl.marks["llm_submit"] == 1141 * MS
    rep = tl.report(final=True)
    assert rep["speculative"] is True and rep["ahead_ms"] == {"asr": 100.0, "prompt_ready": 140.0}


def test_rebase_of_a_retrieval_still_running_at_the_commit():
    tl = timeline(asr_final=1100, retrieval_start=1100, turn_commit=1150)
    tl.rebase_to_commit(1150 * MS, 1000 * MS)
    assert tl.measured["retrieval_ahead"] == 50.0
    assert tl.marks["retrieval_start"] == 1150 * MS
    tl.mark("retrieval_end", 1170 * MS)
    tl.mark("prompt_ready", 1175 * MS)
    s = tl.spans()
    assert s["retrieval"] == 20 and s["prompt"] == 5 and s["asr_finalize"] == 0


def test_rebase_leaves_marks_after_the_commit_untouched():
    tl = timeline(turn_commit=1000, asr_final=1020, retrieval_start=1020, retrieval_end=1040, prompt_ready=1045,
                  llm_submit=1046, first_token=1100, first_token_sent=1101)
    before = dict(tl.marks)
    tl.rebase_to_commit(1000 * MS, 900 * MS)
    assert tl.marks == before
    assert tl.ahead == {} and "retrieval_ahead" not in tl.measured
    assert tl.speculative is True


def test_rebase_a_mark_exactly_at_the_commit_is_after_it():
    tl = timeline(asr_final=1000, retrieval_start=1000, retrieval_end=1000)
    tl.rebase_to_commit(1000 * MS, 900 * MS)
    # asr_final and retrieval_start are not before the commit: they stay
    assert tl.marks["asr_final"] == 1000 * MS and tl.marks["retrieval_start"] == 1000 * MS
    assert "asr" not in tl.ahead and "retrieval_ahead" not in tl.measured


@pytest.mark.parametrize("commit", [1050, 1100, 1125, 1135, 1150, 1300])
def test_rebase_never_gives_a_negative_span(commit):
    tl = timeline(speech_start=0, speech_end=900, asr_final=1100, retrieval_start=1100, retrieval_end=1130,
                  prompt_ready=1140, llm_submit=1141)
    tl.mark("turn_commit", commit * MS)
    tl.rebase_to_commit(commit * MS, 1000 * MS)
    for name in ("first_token", "first_token_sent", "first_audio", "first_audio_sent", "response_done"):
        tl.mark(name, max(commit, 1160) * MS)  # the rest of the reply comes later
    s = tl.spans()
    for name in ("asr_finalize", "retrieval", "prompt", "prefill", "ttft", "voice_to_voice", "tts_first_audio"):
        assert s[name] is None or s[name] >= 0, (name, s[name])
    assert all(v >= 0 for v in tl.ahead.values())
    assert tl.measured.get("retrieval_ahead", 0) >= 0
