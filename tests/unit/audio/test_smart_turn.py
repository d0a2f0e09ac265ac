"""smart-turn's input: the last 8 s, zero-padded at the start, as an (80, 800) Whisper log-mel; and the [turn]
stage's model file resolved and checked like the embedder's (no model is run here)."""

import numpy as np
import pytest

from sub250.audio.smart_turn import N_FRAMES, N_MELS, N_SAMPLES, SmartTurn, features, last_window
from sub250.errors import ModelError
from sub250.modelstore import prepare
from sub250.profiles import Profile, load_profile

RATE = 16_000


def tone(seconds: float, hz: float = 440.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amp * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def test_short_audio_is_padded_at_the_start():
    a = tone(1.0)
    w = last_window(a)
    assert w.shape == (N_SAMPLES,) and w.dtype == np.float32
    assert not w[: N_SAMPLES - a.size].any()
    np.testing.assert_array_equal(w[-a.size :], a)


def test_long_audio_keeps_its_last_8_seconds():
    a = np.arange(10 * RATE, dtype=np.float32)
    w = last_window(a)
    np.testing.assert_array_equal(w, a[-N_SAMPLES:])


def test_stereo_is_refused():
    with pytest.raises(ValueError):
        last_window(np.zeros((2, RATE), dtype=np.float32))


def test_features_shape_and_range():
    mel = features(tone(2.0))
    assert mel.shape == (N_MELS, N_FRAMES) and mel.dtype == np.float32
    # log10 clamped to 8 below its maximum, then (x + 4) / 4: a range of at most 2
    assert mel.max() - mel.min() <= 2.0 + 1e-5


def test_the_sound_is_at_the_end_of_the_features():
    # 1 s of tone: the padding (7 s of zeros) comes first, so the energy is in the last ~100 frames
    mel = features(tone(1.0))
    energy = mel.mean(axis=0)
    assert energy[-90:].min() > energy[:600].max()
    # a 440 Hz tone lands in the low mel bands, not the top ones
    assert mel[:, -50:].mean(axis=1)[:30].max() > mel[:, -50:].mean(axis=1)[-20:].max()


def test_features_match_transformers_whisper_extractor():
    """The reference Pipecat vendors: WhisperFeatureExtractor(chunk_length=8), on the 8 s padded window."""
    transformers = pytest.importorskip("transformers")
    fe = transformers.WhisperFeatureExtractor(chunk_length=8)
    rng = np.random.default_rng(0)
    speechy = np.concatenate([tone(0.7, 180), 0.01 * rng.standard_normal(RATE // 3).astype(np.float32),
                              tone(1.1, 310, 0.5) * np.hanning(int(1.1 * RATE)).astype(np.float32)])
    for clip in (speechy, np.concatenate([speechy] * 5)):  # 2.1 s (padded) and 10.7 s (cut)
        ref = fe(last_window(clip), sampling_rate=RATE, padding="max_length", max_length=N_SAMPLES,
                 truncation=True, do_normalize=True, return_tensors="np").input_features[0]
        np.testing.assert_allclose(features(clip), ref, atol=2e-3)


def test_probability_needs_load(tmp_path):
    with pytest.raises(RuntimeError):
        SmartTurn(tmp_path / "none.onnx").probability(tone(1.0))


def test_a_file_that_is_not_onnx_gives_a_model_error(tmp_path):
    bad = tmp_path / "smart-turn.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError) as err:
        SmartTurn(bad).load()
    assert "smart-turn.onnx" in str(err.value) and "pipecat-ai==1.14.0" in str(err.value)


# --- the [turn] stage of the profile ----------------------------------------------------------------------


def _profile(tmp_path, **stages) -> Profile:
    return Profile(name="t", description="", path=tmp_path / "t.toml", stages=stages)


def test_cpu_tiny_has_a_turn_stage_from_the_pipecat_carrier():
    turn = load_profile("cpu-base").stage("turn")
    assert turn["source"] == "package:pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
    assert len(turn["sha256"]) == 64


def test_corrupt_turn_model_is_detected(tmp_path):
    fake = tmp_path / "smart-turn-v3.2-cpu.onnx"
    fake.write_bytes(b"not the model")
    cfg = dict(load_profile("cpu-base").stage("turn"), source=f"path:{fake}")
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, turn=cfg), tmp_path / "m", stages=("turn",))
    assert "end-of-turn model" in str(err.value) and "corrupt" in str(err.value)
    assert fake.read_bytes() == b"not the model"


def test_turn_stage_is_optional_only_when_not_asked_for(tmp_path, monkeypatch):
    from sub250 import modelstore

    seen = []
    fakes = {s: (lambda cfg, d, f, s=s: seen.append(s) or {"model": s}) for s in modelstore._PREPARERS}
    monkeypatch.setattr(modelstore, "_PREPARERS", fakes)
    without = _profile(tmp_path, **{s: {"source": "x"} for s in fakes if s != "turn"})
    assert "turn" not in prepare(without, tmp_path / "m").paths  # every stage: [turn] may be left out
    with pytest.raises(ModelError) as err:  # asked for by name, it is needed
        prepare(without, tmp_path / "m", stages=("turn",))
    assert "[turn]" in str(err.value)
    with_turn = _profile(tmp_path, **{s: {"source": "x"} for s in fakes})
    assert prepare(with_turn, tmp_path / "m").paths["turn"] == {"model": "turn"}
    without_asr = _profile(tmp_path, **{s: {"source": "x"} for s in fakes if s != "asr"})
    with pytest.raises(ModelError) as err:  # a required stage stays required
        prepare(without_asr, tmp_path / "m")
    assert "[asr]" in str(err.value)
