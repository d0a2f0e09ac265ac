"""The fusion of the end-of-turn model and smart-turn (scripts/bench/fusion.py): the pauses it takes from an
endpointing report, the split, and a fit that learns which feature tells."""

import math

import numpy as np
import pytest

from scripts.bench import fusion


def _stream(sid, variant, *, transcripts, scores, pause=None, speech_end_ms=2400.0, group="synthetic"):
    return {"id": sid, "group": group, "variant": variant, "pause": pause, "speech_end_ms": speech_end_ms,
            "transcripts": transcripts, "scores": scores}


def test_pause_samples_read_the_words_and_smart_turn_at_each_pause():
    report = {"words_llm": {"reader": "model", "scores": {"What comes in the box": -0.1, "What": -3.0}},
              "streams": [
                  # the true end: last speech window 74 (speech_end_ms is its end), smart-turn at 200 ms: 80
                  _stream("q01", "end", transcripts=[[74, "What comes in the box?"]],
                          scores=[[74, 0.5], [79, 0.6], [80, 0.9], [82, 0.95]]),
                  # a pause inserted at 495 ms (window 15); a later transcript (the end) is not this pause's
                  _stream("q01", "paused", pause=[495.0, 992.0], transcripts=[[15, "What"], [87, "What comes"]],
                          scores=[[21, 0.7], [93, 0.9]]),
                  # words the model never read: left out
                  _stream("q02", "end", transcripts=[[74, "Unread words"]], scores=[[80, 0.9]]),
              ]}
    samples = fusion.pause_samples(report)
    assert [(s.done, s.words, s.model_logprob, s.smart_turn) for s in samples] == [
        (True, "What comes in the box?", -0.1, 0.9), (False, "What", -3.0, 0.7)]
    assert samples[0].utterance == "synthetic/q01"


def test_an_utterance_and_all_its_pauses_fall_on_one_side():
    names = [f"synthetic/q{i:02d}" for i in range(40)]
    sides = [fusion.held_out(n) for n in names]
    assert 10 < sum(sides) < 30, "about half held out"
    assert sides == [fusion.held_out(n) for n in names], "the same every run"


def _sample(done, logprob, smart):
    return fusion.PauseSample("synthetic/x", "synthetic", done, "", logprob, smart)


def test_the_fit_weighs_the_feature_that_tells_and_not_the_one_that_does_not():
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(200):
        done = bool(rng.random() < 0.3)
        logprob = math.log(rng.uniform(0.6, 0.99) if done else rng.uniform(0.01, 0.5))
        samples.append(_sample(done, logprob, float(rng.uniform(0.05, 0.95))))  # smart-turn: noise
    w = fusion.fit(samples)
    assert w[0] > 1.0 and abs(w[1]) < 0.3 * w[0]
    p = fusion.scores(samples, w)
    labels = np.array([s.done for s in samples], dtype=float)
    assert fusion.auc(p["fusion"], labels) > 0.95 and fusion.auc(p["model"], labels) == pytest.approx(1.0)
    assert 0.3 < fusion.auc(p["smart-turn"], labels) < 0.7


def test_auc_counts_ties_as_half():
    assert fusion.auc(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == 0.5
    assert fusion.auc(np.array([0.9, 0.1]), np.array([1.0, 0.0])) == 1.0
