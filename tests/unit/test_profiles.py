import pytest

from app.errors import ConfigError
from app.profiles import available_profiles, load_profile
from app.session.tuning import PipelineTuning


def test_shipped_profiles_load_and_cover_every_stage():
    names = available_profiles()
    assert {"cpu-tiny", "cpu-gemma", "gpu-8b", "remote-vllm"} <= set(names)
    for name in names:
        p = load_profile(name)
        for stage in ("vad", "asr", "embedder", "llm", "tts"):
            assert p.stage(stage), f"{name} lacks [{stage}]"
        PipelineTuning.from_profile(p)  # what the session reads of it is valid (typed options check themselves)


def test_the_interruption_checks_confidence_test_is_on_for_whisper_base_only():
    assert load_profile("cpu-base").stage("interruption")["min_confidence"] == -1.3
    tuning = {n: PipelineTuning.from_profile(load_profile(n)).interruption.min_confidence
              for n in ("cpu-base", "cpu-tiny", "cpu-base-no-confidence")}
    assert tuning == {"cpu-base": -1.3, "cpu-tiny": None, "cpu-base-no-confidence": None}


def test_cpu_base_searches_two_beams_for_final_transcripts_and_its_comparison_profiles_differ_in_one_option():
    from app.asr.whisper import WhisperASR

    beams = {n: (lambda a: (a.beam_size, a.final_beam_size))(WhisperASR("unused", load_profile(n).stage("asr")))
             for n in ("cpu-base", "cpu-base-greedy-final", "cpu-tiny")}
    assert beams == {"cpu-base": (1, 2), "cpu-base-greedy-final": (1, 1), "cpu-tiny": (1, 1)}
    hold = {n: PipelineTuning.from_profile(load_profile(n)).interruption.hold_speech
            for n in ("cpu-base", "cpu-tiny", "cpu-base-no-hold")}
    assert hold == {"cpu-base": True, "cpu-tiny": True, "cpu-base-no-hold": False}


def test_default_profile_is_offline_and_speculative():
    p = load_profile("cpu-tiny")
    assert p.stage("llm")["speculative"]["method"] == "ngram"
    assert p.stage("llm")["prefix_caching"] is True
    for stage in ("vad", "asr", "embedder", "llm", "tts"):
        assert "hub:" not in p.stage(stage)["source"], "the embedded profile must not need a model hub"


def test_extends_merges_stage_tables():
    p = load_profile("gpu-8b")
    assert p.stage("llm")["source"].startswith("hub:")
    assert p.stage("tts") == load_profile("cpu-tiny").stage("tts")  # inherited
    assert p.stage("llm")["speculative"]["method"] == "eagle3"


def test_unknown_profile_names_the_choices():
    with pytest.raises(ConfigError) as err:
        load_profile("no-such-profile")
    assert "cpu-tiny" in str(err.value)


def test_bad_toml_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\nsource=")
    with pytest.raises(ConfigError) as err:
        load_profile(str(bad))
    assert "bad.toml" in str(err.value)


def test_cpu_base_words_reads_the_words_at_a_pause_and_the_default_does_not():
    words = {n: (lambda t: (t.finished_commit_ms, t.finished_logprob, t.unfinished_hold_ms, t.hold_open_ms))(
        PipelineTuning.from_profile(load_profile(n))) for n in ("cpu-base", "cpu-base-words", "cpu-tiny")}
    assert words["cpu-base-words"] == (200, -4.0, 700, 1000)
    assert words["cpu-base"][0] == 0 and words["cpu-base"][3] == 1000
    assert words["cpu-tiny"][0] == 0


def test_speech_is_scheduled_by_need_except_in_its_comparison_profile():
    scheduling = {n: load_profile(n).stage("tts").get("scheduling") for n in ("cpu-base", "cpu-base-tts-arrival")}
    assert scheduling == {"cpu-base": "need", "cpu-base-tts-arrival": "arrival"}
    assert load_profile("cpu-base-tts-arrival").stage("asr") == load_profile("cpu-base").stage("asr")
