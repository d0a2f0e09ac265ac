"""The vLLM server of the fleet runs the profile's LLM with the in-process engine's settings."""

import json

from sub250.fleet import vllm_server
from sub250.profiles import load_profile


def test_the_command_carries_the_profiles_engine_settings():
    llm = load_profile("cpu-base").stage("llm")
    argv = vllm_server.command(llm, "/models/llm", host="127.0.0.1", port=8000, enforce_eager=True,
                               python="python")
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    opts = dict(zip(argv[3::1], argv[4::1]))
    assert opts["--model"] == "/models/llm" and opts["--served-model-name"] == "smollm2-135m-instruct"
    assert opts["--block-size"] == "32" and opts["--max-model-len"] == "2048" and opts["--dtype"] == "bfloat16"
    assert json.loads(opts["--speculative-config"])["method"] == "ngram"
    assert "--enable-prefix-caching" in argv and "--enforce-eager" in argv


def test_prefix_caching_off_and_no_speculation_are_said_too():
    argv = vllm_server.command({"prefix_caching": False}, "/m", host="h", port=1)
    assert "--no-enable-prefix-caching" in argv and "--speculative-config" not in argv
    assert "--enforce-eager" not in argv


def test_the_environment_bounds_the_kv_cache(tmp_path):
    env = vllm_server.environment({"kv_cache_gib": 3}, tmp_path)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3" and env["VLLM_CACHE_ROOT"] == str(tmp_path)
