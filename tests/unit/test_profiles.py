import pytest

from scripts.bench import lab
from sub250.errors import ConfigError
from sub250.profile_keys import STAGE_KEYS
from sub250.profiles import PROFILES_DIR, available_profiles, load_profile
from sub250.session.tuning import PipelineTuning
from sub250.turn_model import words_reader

DEPLOYABLE = {"cpu-base", "cpu-gemma", "gpu-8b", "remote-vllm"}


def test_models_holds_the_deployable_profiles_only_and_each_covers_every_stage():
    assert set(available_profiles()) == DEPLOYABLE and len(list(PROFILES_DIR.iterdir())) <= 5
    for name in available_profiles():
        p = load_profile(name)
        for stage in ("vad", "asr", "embedder", "llm", "tts", "answer", "tools", "interruption", "turn"):
            assert p.stage(stage), f"{name} lacks [{stage}]"
        PipelineTuning.from_profile(p)  # what the session reads of it is valid (typed options check themselves)


def test_no_deployable_profile_inherits_from_a_comparison_point():
    import tomllib

    for name in DEPLOYABLE:
        parent = tomllib.loads((PROFILES_DIR / f"{name}.toml").read_text()).get("extends")
        assert parent is None or parent in DEPLOYABLE, (name, parent)
    assert "cpu-tiny" in lab.names() and "cpu-baseline" in lab.names()


def test_gpu_8b_carries_nothing_of_the_cpu_llm():
    llm = load_profile("gpu-8b").stage("llm")
    assert llm["speculative"] == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                  "num_speculative_tokens": 3}  # no prompt_lookup_* of the n-gram drafter
    assert "kv_cache_gib" not in llm and "block_size" not in llm
    assert load_profile("gpu-8b").stage("asr")["device"] == "cuda"
    assert PipelineTuning.from_profile(load_profile("gpu-8b")).answer.mode == "choice"


def test_a_stage_written_replaces_the_parent_s_whole_and_set_changes_single_keys(tmp_path):
    child = tmp_path / "child.toml"
    child.write_text('extends = "cpu-base"\n[llm]\nbackend = "openai"\nbase_url = "http://x/v1"\n'
                     '[set.vad]\nhold_open_ms = 0\n')
    p, base = load_profile(str(child)), load_profile("cpu-base")
    assert p.stage("llm") == {"backend": "openai", "base_url": "http://x/v1"}  # nothing of cpu-base's [llm]
    assert p.stage("vad") == {**base.stage("vad"), "hold_open_ms": 0}
    assert p.stage("asr") == base.stage("asr")  # a stage not written is the parent's
    grandchild = tmp_path / "grandchild.toml"
    grandchild.write_text('extends = "child.toml"\n[set.llm]\nmax_tokens = 5\n')  # relative to its own folder
    assert load_profile(str(grandchild)).stage("llm")["max_tokens"] == 5


@pytest.mark.parametrize("text, named", [
    ('extends = "cpu-base"\n[set.vad]\nhold_opne_ms = 0\n', "'hold_opne_ms' (did you mean 'hold_open_ms'?)"),
    ('[asr]\nbeam_sise = 2\n', "'beam_sise'"),
    ('[vadd]\nthreshold = 0.5\n', "unknown key 'vadd' (did you mean 'vad'?)"),
    ('[asr]\nbeam_size = "2"\n', "beam_size = '2' must be an integer"),
    ('[asr]\npartials = 1\n', "partials = 1 must be true or false"),
    ('[answer]\nmin_score = true\n', "min_score = True must be"),
    ('[set.vad]\nhold_open_ms = 0\n', "extends no profile"),
    ('extends = "cpu-base"\n[set.vadd]\nx = 1\n', "unknown stage [vadd]"),
    ('extends = 3\n', "extends must be"),
])
def test_a_misspelt_or_mistyped_key_is_an_error_naming_it(tmp_path, text, named):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_profile(str(bad))
    assert named in str(err.value)


def test_every_key_a_profile_uses_is_one_the_schema_knows():
    for name in [*available_profiles(), *lab.names()]:
        for stage, table in load_profile(lab.profile(name)).stages.items():
            assert set(table) <= set(STAGE_KEYS[stage]), (name, stage)


def test_a_cycle_is_an_error(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    with pytest.raises(ConfigError, match="extends itself"):
        load_profile(str(tmp_path / "a.toml"))


def test_the_interruption_checks_confidence_test_is_on_for_whisper_base_only():
    assert load_profile("cpu-base").stage("interruption")["min_confidence"] == -1.3
    tuning = {n: PipelineTuning.from_profile(load_profile(lab.profile(n))).interruption.min_confidence
              for n in ("cpu-base", "cpu-tiny", "cpu-base-no-confidence")}
    assert tuning == {"cpu-base": -1.3, "cpu-tiny": None, "cpu-base-no-confidence": None}


def test_cpu_base_searches_two_beams_for_final_transcripts_and_its_comparison_profiles_differ_in_one_option():
    from sub250.asr.whisper import WhisperASR

    beams = {n: (lambda a: (a.beam_size, a.final_beam_size))(WhisperASR("unused", load_profile(lab.profile(n)).stage("asr")))
             for n in ("cpu-base", "cpu-base-greedy-final", "cpu-tiny")}
    assert beams == {"cpu-base": (1, 2), "cpu-base-greedy-final": (1, 1), "cpu-tiny": (1, 1)}
    hold = {n: PipelineTuning.from_profile(load_profile(lab.profile(n))).interruption.hold_speech
            for n in ("cpu-base", "cpu-tiny", "cpu-base-no-hold")}
    assert hold == {"cpu-base": True, "cpu-tiny": True, "cpu-base-no-hold": False}


def test_default_profile_is_offline_and_speculative():
    p = load_profile("cpu-base")
    assert p.stage("llm")["speculative"]["method"] == "ngram"
    assert p.stage("llm")["prefix_caching"] is True
    for stage in ("vad", "asr", "embedder", "llm", "tts"):
        assert "hub:" not in p.stage(stage)["source"], "the embedded profile must not need a model hub"


def test_unknown_profile_names_the_choices():
    with pytest.raises(ConfigError) as err:
        load_profile("no-such-profile")
    assert "cpu-base" in str(err.value) and "cpu-tiny" not in str(err.value)


def test_bad_toml_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\nsource=")
    with pytest.raises(ConfigError) as err:
        load_profile(str(bad))
    assert "bad.toml" in str(err.value)


def test_cpu_base_words_reads_the_words_at_a_pause_and_the_default_does_not():
    words = {n: (lambda t: (t.finished_commit_ms, t.finished_logprob, t.unfinished_hold_ms, t.hold_open_ms))(
        PipelineTuning.from_profile(load_profile(lab.profile(n)))) for n in ("cpu-base", "cpu-base-words", "cpu-tiny")}
    assert words["cpu-base-words"] == (200, -4.0, 700, 1000)
    assert words["cpu-base"][0] == 0 and words["cpu-base"][3] == 1000
    assert words["cpu-tiny"][0] == 0


def test_the_words_reader_is_the_llm_unless_a_profile_names_our_model(tmp_path):
    readers = {n: words_reader(load_profile(lab.profile(n)))
               for n in ("cpu-base", "cpu-base-words", "cpu-base-turn-model")}
    assert readers == {"cpu-base": "llm", "cpu-base-words": "llm", "cpu-base-turn-model": "model"}
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nextends = "cpu-base"\n[set.vad]\nreader = "crystal-ball"\n')
    with pytest.raises(ConfigError, match="neither"):
        words_reader(load_profile(str(bad)))


def test_speech_is_scheduled_by_need_except_in_its_comparison_profile():
    arrival = load_profile(lab.profile("cpu-base-tts-arrival"))
    assert load_profile("cpu-base").stage("tts")["scheduling"] == "need"
    assert arrival.stage("tts")["scheduling"] == "arrival" and arrival.name == "cpu-base-tts-arrival"
    assert arrival.stage("asr") == load_profile("cpu-base").stage("asr")


def test_a_lab_name_resolves_to_its_override_file_and_anything_else_is_left_as_given():
    assert lab.profile("cpu-tiny").endswith("scripts/profiles/cpu-tiny.toml")
    assert lab.profile("cpu-base") == "cpu-base" and lab.profile("x/y.toml") == "x/y.toml"
