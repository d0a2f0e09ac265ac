"""Our end-of-turn model (app/turn_model), the shipped head on the real MiniLM: it loads only the head it was
given (hash-checked), scores whole questions above the same questions broken off, and its training is one
seeded command that gives the same head twice."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scripts.bench import lab
from sub250.errors import ModelError
from sub250.modelstore import prepare
from sub250.profiles import load_profile
from sub250.rag.embedder import Embedder
from sub250.turn_model.model import HEAD, TurnModel

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[2]
#: Whole questions of the replay corpus (never trained on: scripts/train_turn_model.py leaves it out) and the
#: same words broken off where a caller hesitates.
WHOLE = ["How far from the wall should I put my purifier", "Can I control the purifier with Alexa",
         "How often should I replace the filter", "What comes in the box with the Halden Aero",
         "Does the Aero work with Apple Home"]
CUT = ["How far from the wall should I put my", "Can I control the purifier with",
       "How often should I replace the", "What comes in the box with the", "Does the Aero work with"]


@pytest.fixture(scope="module")
def embedder(settings):
    m = prepare(load_profile("cpu-base"), settings.models_dir, stages=("embedder",))["embedder"]
    e = Embedder(m["model"], m["tokenizer"], load_profile("cpu-base").stage("embedder"))
    e.load()
    yield e, m["tokenizer"]
    e.close_threads()


@pytest.fixture(scope="module")
def model(embedder):
    e, tokenizer = embedder
    tm = TurnModel(e, tokenizer, sha256=hashlib.sha256(HEAD.read_bytes()).hexdigest())
    tm.load()
    return tm


def test_the_shipped_head_is_the_one_its_card_and_profile_name():
    sha = hashlib.sha256(HEAD.read_bytes()).hexdigest()
    card = (HEAD.parent / "CARD.md").read_text()
    assert sha in card, "CARD.md names the head's sha256"
    profile = load_profile(lab.profile("cpu-base-turn-model"))
    assert profile.stage("vad")["model_sha256"] == sha


def test_whole_questions_score_above_the_same_words_broken_off(model):
    whole = [model.probability(t) for t in WHOLE]
    cut = [model.probability(t) for t in CUT]
    print("whole", np.round(whole, 3), "cut", np.round(cut, 3))
    assert all(0.0 < p < 1.0 for p in whole + cut)
    assert all(w > c for w, c in zip(whole, cut, strict=True)), "each question scores above its own cut"
    assert np.mean(whole) - np.mean(cut) > 0.3


async def test_a_reading_runs_on_the_embedders_threads(model):
    logp = await model.done_logprob("Where is my order")
    assert -30 < logp < 0
    assert logp == pytest.approx(np.log(model.probability("Where is my order")))
    # what TurnWords asks of a reader (as of the LLM engine); punctuation is not read
    assert await model.turn_end_logprob("Where is my order?", "eot-1") == pytest.approx(logp)


def test_a_head_that_is_not_the_one_named_is_refused(embedder, tmp_path):
    e, tokenizer = embedder
    with pytest.raises(ModelError, match="does not match its sha256"):
        TurnModel(e, tokenizer, sha256="0" * 64).load()
    broken = tmp_path / "head.npz"
    np.savez(broken, dense_w=np.zeros(10, dtype=np.float32))
    with pytest.raises(ModelError, match="not one this version reads"):
        TurnModel(e, tokenizer, head=broken).load()
    with pytest.raises(ModelError, match="cannot be read"):
        TurnModel(e, tokenizer, head=tmp_path / "missing.npz").load()


def test_training_is_one_seeded_command_that_gives_the_same_head_twice(tmp_path):
    """A small run (300 dialogue turns) twice with the same seed: the same metrics and the same weights."""
    heads = []
    for run in (1, 2):
        out, report = tmp_path / f"head{run}.npz", tmp_path / f"report{run}.json"
        done = subprocess.run([sys.executable, "scripts/train_turn_model.py", "--train-turns", "300",
                               "--test-turns", "100", "--epochs", "2", "--threads", "1", "--out", str(out),
                               "--report", str(report), "--card", ""], cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONHASHSEED": str(run)})
        assert done.returncode == 0, done.stderr[-2000:]
        heads.append((np.load(out), json.loads(report.read_text())))
    (a, ra), (b, rb) = heads
    assert ra["held_out"] == rb["held_out"]
    assert ra["held_out"]["chitchat"]["samples"] > 100
    for key in ("dense_w", "hashed_w", "bias"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6)


async def test_a_profile_that_names_the_model_gets_it_on_the_embedders_session(settings):
    from sub250.stack import Stack

    stack = Stack(settings=settings, profile=load_profile(lab.profile("cpu-base-turn-model")))
    try:
        await stack.start(stages=("embedder",))
        assert stack.turn_model is not None and stack.turn_model.embedder is stack.embedder
        assert 0.0 < stack.turn_model.probability("Where is my order") < 1.0
    finally:
        await stack.close()
    plain = Stack(settings=settings, profile=load_profile("cpu-base"))
    try:
        await plain.start(stages=("embedder",))
        assert plain.turn_model is None, "cpu-base reads no words"
    finally:
        await plain.close()
