"""The clients people already use, unchanged, against the real server: the OpenAI Agents SDK's
``RealtimeRunner``, LiveKit Agents' ``openai.realtime.RealtimeModel`` and Pipecat's
``OpenAIRealtimeLLMService``, in their own venv (the Agents SDK needs websockets < 17;
``scripts/install-clients.sh``)."""

import asyncio
import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
REPO = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = REPO / ".venv-clients" / "bin" / "python"
MODEL = "smollm2-135m-instruct"


async def run_client(script: str, *args: str, timeout: float = 420) -> dict:
    if not CLIENTS_PYTHON.exists():
        pytest.fail("the clients' venv is missing; make it with: bash scripts/install-clients.sh")
    proc = await asyncio.create_subprocess_exec(str(CLIENTS_PYTHON), str(REPO / "tests" / "clients" / script), *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        raise
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.asyncio(loop_scope="session")
async def test_the_agents_sdk_realtime_runner_calls_a_tool_answers_and_hears_with_no_error(ws_url, real_audio,
                                                                                             tmp_path):
    data, rate = sf.read(str(real_audio / "goforward.wav"), dtype="float32")
    pcm = tmp_path / "goforward.pcm"
    pcm.write_bytes((soxr.resample(data, rate, 24000) * 32767).astype("<i2").tobytes())
    got = await run_client("agents_sdk.py", ws_url, TEST_KEY, str(pcm))
    print(json.dumps(got, indent=1))  # with -s: what the SDK saw
    assert got["errors"] == [] and "error" not in got["raw_types"], got  # no unasked sub250.* events, no refusal
    assert got["calls"] == ["12345"], got
    tool, kb, spoken = got["turns"]
    assert "shipped" in tool["reply"].lower() and tool["audio_bytes"] > 24000, tool  # its output, spoken
    assert re.search(r"nine months|9 months", kb["reply"].lower()), kb  # grounded under the SDK's instructions
    assert any(h.lower().startswith("go forward") for h in got["heard"]), got["heard"]
    assert spoken["audio_bytes"] > 24000 and spoken["reply"], spoken


@pytest.mark.asyncio(loop_scope="session")
async def test_livekit_agents_realtime_model_completes_a_turn_with_audio_and_no_error(server):
    got = await run_client("livekit_agents.py", f"http://127.0.0.1:{server.port}/v1", TEST_KEY, MODEL)
    print(json.dumps(got, indent=1))
    assert got["errors"] == [] and not [r for r in got["logged"] if r.startswith("ERROR")], got
    assert re.search(r"nine months|9 months", got["reply"].lower()), got
    assert got["audio_seconds"] > 1.0, got


@pytest.mark.asyncio(loop_scope="session")
async def test_pipecat_realtime_service_completes_a_turn_with_audio_and_no_error(ws_url):
    got = await run_client("pipecat_realtime.py", ws_url, TEST_KEY, MODEL)
    print(json.dumps(got, indent=1))
    assert got["errors"] == [] and got["logged"] == [], got
    assert re.search(r"nine months|9 months", got["reply"].lower()), got
    assert got["audio_bytes"] > 24000 * 2, got  # over a second of 24 kHz PCM16
