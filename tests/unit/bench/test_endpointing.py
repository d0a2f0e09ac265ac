"""The endpointing benchmark's accounting on hand-made VAD probabilities and a fake end-of-turn model."""

import numpy as np
import pytest

from scripts.bench.endpointing import (
    Boundary, Commit, Outcome, Silence, SilenceCue, SmartTurnRule, Truth, Word, WordsRule, classify, ends_open,
    pause_point,
    simulate, speech_end_window, speech_heard_again_ms, summarize, word_boundaries,
)

# 10 quiet windows, speech 10-29, an inserted pause 30-39 (320 ms), speech 40-59, then 80 quiet windows
PROBS = [0.0] * 10 + [0.9] * 20 + [0.0] * 10 + [0.9] * 20 + [0.0] * 80
END_MS = 60 * 32.0  # the end of window 59
PAUSED = Truth(END_MS, (30 * 32.0, 41 * 32.0))


class FakeModel:
    def __init__(self, p, compute_ms=40.0):
        self.p, self.compute_ms, self.calls = p, compute_ms, []

    def __call__(self, start, window):
        self.calls.append((start, window))
        return (self.p(window) if callable(self.p) else self.p), self.compute_ms


def test_truth_of_the_fixture():
    assert speech_end_window(PROBS) == 59
    assert speech_heard_again_ms(PROBS, 40 * 512) == 41 * 32.0


def test_silence_300_cuts_the_pause_and_silence_500_waits_it_out():
    c300 = simulate(Silence(300), PROBS)  # 9 windows of silence: the 9th quiet window (38) commits
    assert c300 == Commit(39 * 32.0, 38, "silence")
    assert classify(c300, PAUSED) == Outcome("cut_pause")
    c500 = simulate(Silence(500), PROBS)  # 16 windows: window 75, 512 ms after the end
    assert classify(c500, PAUSED) == Outcome("end", 512.0)


def test_smart_turn_scores_each_pause_and_commits_when_sure_with_its_compute_time():
    model = FakeModel(lambda w: 0.1 if w < 60 else 0.9)
    c = simulate(SmartTurnRule(160, 0.5, 1500), PROBS, model)
    assert model.calls[0] == (10, 34)  # from the start of speech, at 5 windows (160 ms) of silence
    assert c == Commit(65 * 32.0 + 40.0, 64, "model", 0.9)
    assert classify(c, PAUSED) == Outcome("end", 5 * 32.0 + 40.0)


def test_rescored_every_three_windows_until_sure():
    model = FakeModel(lambda w: 0.1 if w < 70 else 0.9, compute_ms=10.0)
    c = simulate(SmartTurnRule(160, 0.5, 1500), PROBS, model)
    assert [w for _, w in model.calls] == [34, 37, 64, 67, 70]
    assert c.window == 70 and c.time_ms == 71 * 32.0 + 10.0


def test_a_slow_model_is_not_called_again_before_it_answers():
    model = FakeModel(0.1, compute_ms=200.0)  # 200 ms > the 96 ms re-score interval
    simulate(SmartTurnRule(160, 0.5, 1500), PROBS, model)
    windows = [w for _, w in model.calls if w >= 60]
    assert windows[:3] == [64, 71, 78]  # 64 ends at 2080 ms, answers at 2280: the next window ending after is 71


def test_cap_commits_when_the_model_never_is_sure():
    c = simulate(SmartTurnRule(160, 0.5, 1500), PROBS, FakeModel(0.1))
    assert c.by == "cap" and classify(c, PAUSED) == Outcome("end", 47 * 32.0)


def test_a_confident_model_cuts_the_pause():
    assert classify(simulate(SmartTurnRule(160, 0.5, 1500), PROBS, FakeModel(0.95)), PAUSED).kind == "cut_pause"


def test_speech_resuming_before_the_answer_makes_it_stale():
    # scored at window 34 (1120 ms), answer at 1420 ms: speech is back at window 40 (1312 ms) first
    model = FakeModel(lambda w: 0.95, compute_ms=300.0)
    c = simulate(SmartTurnRule(160, 0.5, 1500), PROBS, model)
    assert classify(c, PAUSED) == Outcome("end", 5 * 32.0 + 300.0)


def test_commit_at_another_gap_is_early_and_no_commit_is_missed():
    assert classify(Commit(500.0, 15, "silence"), PAUSED) == Outcome("early")
    assert classify(None, PAUSED) == Outcome("missed")
    assert simulate(Silence(500), [0.0] * 10 + [0.9] * 5) is None


def test_summary():
    ends = [Outcome("end", 100.0), Outcome("end", 300.0), Outcome("early")]
    paused = [Outcome("cut_pause"), Outcome("end", 900.0), Outcome("end", 50.0), Outcome("missed")]
    s = summarize(ends, paused)
    assert s["mean_delay_ms"] == 200.0  # only the true ends of the normal streams
    assert s["p95_delay_ms"] == pytest.approx(290.0)
    assert s["cut_pause_rate"] == 0.25 and s["early_rate"] == pytest.approx(1 / 7) and s["missed"] == 1


def test_smart_turn_needs_a_scorer():
    with pytest.raises(ValueError):
        simulate(SmartTurnRule(160, 0.5, 1500), PROBS)


class FakeASR:
    """The transcript so far: 'how far from the' in the inserted pause (speech up to window 29), whole after."""

    def __init__(self, compute_ms=50.0):
        self.compute_ms, self.calls = compute_ms, []

    def __call__(self, start, last_speech):
        self.calls.append((start, last_speech))
        return ("how far from the" if last_speech < 40 else "how far from the wall?"), self.compute_ms


def test_ends_open():
    assert ends_open("I want to go and") and ends_open("ten of") and ends_open("the code is 4")
    assert ends_open("seven, eight,") and ends_open("um")
    assert ends_open("My order number is 4-5.") and ends_open("is 4.5.") and ends_open("is 45")
    assert not ends_open("How far from the wall?") and not ends_open("") and not ends_open("go forward.")


def test_the_cue_holds_a_silence_rule_through_an_open_pause():
    asr = FakeASR()
    c = simulate(SilenceCue(300, 1500), PROBS, transcribe=asr)
    assert asr.calls == [(10, 29), (10, 59)]  # once per pause, from the start of speech to its last window
    assert c == Commit(69 * 32.0 + 50.0, 68, "silence")  # 9 windows after the end, plus the ASR's compute
    assert classify(c, PAUSED) == Outcome("end", 9 * 32.0 + 50.0)


def test_the_cue_vetoes_a_confident_model_in_the_pause_and_adds_its_time_at_the_end():
    model = FakeModel(0.95, compute_ms=20.0)
    c = simulate(SmartTurnRule(160, 0.5, 1500, cue=True), PROBS, model, FakeASR(compute_ms=50.0))
    assert [w for _, w in model.calls] == [64]  # no scoring in the vetoed pause
    assert classify(c, PAUSED) == Outcome("end", 5 * 32.0 + 50.0)  # the ASR (50 ms) answers after the model


def test_trim_scores_the_speech_only_once_a_pause():
    model = FakeModel(lambda w: 0.1 if w < 59 else 0.9)
    c = simulate(SmartTurnRule(160, 0.5, 1500, trim=True), PROBS, model)
    assert model.calls == [(10, 29), (10, 59)]  # the last speech window, not the window being processed
    assert c == Commit(65 * 32.0 + 40.0, 64, "model", 0.9)
    sure_never = FakeModel(0.1)
    assert simulate(SmartTurnRule(160, 0.5, 1500, trim=True), PROBS, sure_never).by == "cap"
    assert len(sure_never.calls) == 2  # not re-scored while the silence lasts


def test_once_scores_each_pause_once_with_its_silence():
    model = FakeModel(0.1)
    c = simulate(SmartTurnRule(160, 0.5, 1500, once=True), PROBS, model)
    assert model.calls == [(10, 34), (10, 64)] and c.by == "cap"


def test_a_cue_rule_needs_a_transcriber():
    with pytest.raises(ValueError):
        simulate(SilenceCue(300, 1500), PROBS)
    with pytest.raises(ValueError):
        simulate(SmartTurnRule(160, 0.5, 1500, cue=True), PROBS, FakeModel(0.5))


def _tone(n, amp=0.3):
    return (amp * np.sin(2 * np.pi * 200 * np.arange(n) / 16_000)).astype(np.float32)


def test_pause_point_prefers_a_vad_gap_between_words():
    w = 512
    audio = np.concatenate([np.zeros(10 * w), _tone(30 * w), 0.001 * _tone(4 * w), _tone(30 * w), np.zeros(10 * w)])
    probs = [0.0] * 10 + [0.9] * 30 + [0.1] * 4 + [0.9] * 30 + [0.0] * 10
    at, how = pause_point(audio.astype(np.float32), probs)
    assert how == "vad-gap" and 40 * w <= at < 44 * w


def test_pause_point_falls_back_to_the_quietest_spot_of_the_middle_half():
    w = 512
    audio = _tone(60 * w)
    audio[35 * w : 36 * w] *= 0.01  # a dip, but the VAD never drops
    at, how = pause_point(audio, [0.9] * 60)
    assert how == "middle" and 35 * w <= at < 36 * w
    with pytest.raises(ValueError):
        pause_point(audio, [0.0] * 60)


def test_fallback_commits_a_pause_the_model_called_incomplete_at_its_silence():
    model = FakeModel(0.1, compute_ms=20.0)
    rule = SmartTurnRule(160, 0.5, 1500, once=True, fallback_ms=384)  # 12 windows
    c = simulate(rule, PROBS, model)  # the inserted pause (10 windows) is shorter: it goes on
    assert c.by == "fallback" and c.window == 71, "12 quiet windows after the last speech (59)"
    assert classify(c, PAUSED) == Outcome("end", 12 * 32.0)
    assert "+then384" in rule.name
    longer = [0.0] * 10 + [0.9] * 20 + [0.0] * 14 + [0.9] * 20 + [0.0] * 80
    assert simulate(rule, longer, FakeModel(0.1)).window == 41, "a 14-window pause is cut at its 12th"
    assert simulate(rule, longer, FakeModel(0.9)).by == "model", "a 'complete' commits at once"


def test_a_cue_that_holds_the_pause_keeps_the_fallback_from_committing():
    longer = [0.0] * 10 + [0.9] * 20 + [0.0] * 14 + [0.9] * 20 + [0.0] * 80
    c = simulate(SmartTurnRule(160, 0.5, 1500, once=True, cue=True, fallback_ms=384), longer, FakeModel(0.1),
                 FakeASR())
    assert c.by == "fallback" and c.window == 63 + 12, "held through the open pause, committed after the end"


def test_word_boundaries_sit_in_the_quiet_between_two_words():
    rate = 16_000
    audio = np.concatenate([_tone(8000), np.zeros(800, dtype=np.float32), _tone(8000), _tone(8000)])
    words = [Word("how", 0.0, 0.5), Word("far", 0.55, 1.05), Word("the", 1.05, 1.55)]
    places = word_boundaries(audio, words, rate=rate)
    assert [b.after for b in places] == [0, 1]
    assert 8000 <= places[0].sample <= 8800, "inside the 50 ms of silence between 'how' and 'far'"
    assert places[0].prefix == "how" and places[0].kind == "other"
    assert places[1].prefix == "how far" and abs(places[1].sample - 16800) <= 0.04 * rate
    assert Boundary(0, 0, "how far from the").kind == "open"


def test_the_sessions_cue_is_asked_for_early_and_a_commit_waits_for_words_not_known_yet():
    asr = FakeASR(compute_ms=50.0)
    rule = SilenceCue(300, 1500, cue_after_ms=64)  # the held reply's transcript, at 2 windows of silence
    c = simulate(rule, PROBS, transcribe=asr)
    assert asr.calls == [(10, 29), (10, 59)]
    assert c == Commit(69 * 32.0, 68, "silence"), "the end's words are known by 300 ms: no wait for them"
    assert classify(c, PAUSED) == Outcome("end", 9 * 32.0) and "+cue@64" in rule.name
    # known only 400 ms after they are asked for: the open pause is held meanwhile, the end waits for its words
    slow = simulate(rule, PROBS, transcribe=FakeASR(compute_ms=400.0))
    assert classify(slow, PAUSED) == Outcome("end", 62 * 32.0 + 400.0 - END_MS)


def test_a_gap_too_short_to_be_a_pause_leaves_no_stale_cue():
    # speech, a 4-window gap (an early cue, but no pause for a 300 ms rule), speech, then the end
    probs = [0.0] * 10 + [0.9] * 20 + [0.0] * 4 + [0.9] * 20 + [0.0] * 80
    asr = FakeASR()  # "how far from the" (open) for the gap, "...wall?" at the end
    c = simulate(SilenceCue(300, 1500, cue_after_ms=64), probs, transcribe=asr)
    assert asr.calls == [(10, 29), (10, 53)]
    assert c.by == "silence" and c.window == 53 + 9, "the end's own words decide, not the gap's"


class FakeJudge:
    """log P(turn ends) per text: "finished" words score -10, others -16; records what it was asked."""

    def __init__(self, compute_ms=30.0, finished=("how far from the wall?",)):
        self.compute_ms, self.finished, self.calls = compute_ms, finished, []

    def __call__(self, text):
        self.calls.append(text)
        return (-10.0 if text in self.finished else -16.0), self.compute_ms


def test_the_llms_reading_of_the_words_commits_a_finished_turn_soon_and_holds_an_unfinished_pause():
    asr, judge = FakeASR(compute_ms=50.0), FakeJudge(compute_ms=30.0)
    rule = WordsRule(200, -12.0, 1500)
    c = simulate(rule, PROBS, transcribe=asr, judge=judge)
    assert asr.calls == [(10, 29), (10, 59)], "asked at 64 ms of each pause, from the start of speech"
    assert judge.calls == ["how far from the", "how far from the wall?"]
    # 200 ms is 6.25 windows: the 7th quiet window after the end (66) commits; the words were known by then
    assert c == Commit(67 * 32.0, 66, "words", -10.0)
    assert classify(c, PAUSED) == Outcome("end", 7 * 32.0)
    assert "lp>=-12" in rule.name


def test_words_known_late_delay_the_commit_and_unfinished_words_wait_for_the_cap():
    slow = simulate(WordsRule(200, -12.0, 1500), PROBS, transcribe=FakeASR(compute_ms=300.0), judge=FakeJudge())
    # asked at window 61 (2 quiet windows), known 330 ms later: committed then, not at the 200 ms of silence
    assert slow.by == "words" and slow.time_ms == pytest.approx(62 * 32.0 + 330.0)
    never = simulate(WordsRule(200, -12.0, 1000), PROBS, transcribe=FakeASR(), judge=FakeJudge(finished=()))
    assert never.by == "cap" and classify(never, PAUSED) == Outcome("end", 31 * 32.0)


def test_open_words_are_never_a_finished_turn_and_a_confident_judge_cuts_the_pause():
    everything = ("how far from the", "how far from the wall?")
    cut = simulate(WordsRule(200, -12.0, 1500), PROBS, transcribe=FakeASR(),
                   judge=FakeJudge(finished=everything))
    assert classify(cut, PAUSED) == Outcome("end", 7 * 32.0), "'...from the' ends open: the pause is held"
    closed = lambda start, last: ("how far is it" if last < 40 else "how far is it from the wall?", 10.0)  # noqa: E731
    c = simulate(WordsRule(200, -12.0, 1500), PROBS, transcribe=closed, judge=FakeJudge(finished=("how far is it",)))
    assert classify(c, PAUSED) == Outcome("cut_pause")
    with pytest.raises(ValueError, match="judge"):
        simulate(WordsRule(200, -12.0, 1500), PROBS, transcribe=FakeASR())


def test_unfinished_words_that_do_not_end_open_may_end_sooner_than_the_cap():
    closed_asr = lambda start, last: ("how far is it" if last < 40 else "how far is it from the wall", 10.0)  # noqa: E731
    rule = WordsRule(200, -12.0, 1500, unfinished_ms=480)
    c = simulate(rule, PROBS, transcribe=closed_asr, judge=FakeJudge(finished=()))
    # the inserted pause is 320 ms: not cut; the end's unfinished words end at 480 ms (15 windows) of silence
    assert c.by == "fallback" and classify(c, PAUSED) == Outcome("end", 15 * 32.0) and "else 480" in rule.name
    open_asr = lambda start, last: ("how far is it from the", 10.0)  # noqa: E731
    held = simulate(rule, PROBS, transcribe=open_asr, judge=FakeJudge(finished=()))
    assert held.by == "cap", "open words wait for the cap"
