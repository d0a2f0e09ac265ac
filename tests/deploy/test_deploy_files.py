"""The deployment files as their own tools read them: docker-compose.yml through `docker-compose config` (Debian's
1.29), deploy/haproxy/haproxy.cfg through `haproxy -c` (2.6), and what they mean for the fleet (docs/DEPLOY.md).

No Docker engine is needed, and none is used: the image is not built and no container runs here. The two tools
are required (`make test` installs them with scripts/install-fleet-tools.sh): a missing one fails, it does not
skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml


REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
HAPROXY_CFG = REPO / "deploy" / "haproxy" / "haproxy.cfg"
INSTALL_HINT = "install it with: bash scripts/install-fleet-tools.sh (make test runs it)"


def _tool(name: str, *also: str) -> str:
    found = shutil.which(name) or next((p for p in also if os.access(p, os.X_OK)), None)
    if found is None:
        pytest.fail(f"{name} is not installed; {INSTALL_HINT}")
    return found


def _compose(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`docker-compose -f docker-compose.yml ...` with none of the file's variables set (every one has a default)
    and an empty env file instead of a developer's `.env`."""
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run([_tool("docker-compose"), "--env-file", str(env_file), "-f", str(COMPOSE), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict:
    done = _compose(tmp_path_factory.mktemp("compose"), "config")
    assert done.returncode == 0, done.stderr[-3000:]
    return yaml.safe_load(done.stdout)


def _haproxy_lines() -> list[str]:
    """The config's directives: comments and blank lines dropped, whitespace collapsed."""
    out = []
    for raw in HAPROXY_CFG.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            out.append(" ".join(line.split()))
    return out


def _app_services(compose: dict) -> dict[str, dict]:
    """The long-running app replicas: built from the Dockerfile, serving (not the one-shot ingest)."""
    return {name: svc for name, svc in compose["services"].items()
            if "build" in svc and svc.get("command") in (None, ["serve"])}


def _seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


# --- docker-compose.yml ---------------------------------------------------------------------------------------


def test_compose_file_is_valid_with_no_variables_set(tmp_path):
    done = _compose(tmp_path, "config", "-q")
    assert done.returncode == 0, done.stderr[-3000:]


def test_app_replicas_run_the_remote_profile_against_db_and_vllm(compose):
    apps = _app_services(compose)
    assert len(apps) >= 2, sorted(compose["services"])
    replicas = set()
    for name, svc in apps.items():
        env = svc["environment"]
        assert env["SUB250_PROFILE"] == "remote-vllm", name
        db = urlsplit(env["DATABASE_URL"])
        assert db.scheme in ("postgresql", "postgres") and db.hostname == "db" and db.port == 5432, (name, db)
        llm = urlsplit(env["SUB250_LLM_BASE_URL"])
        assert llm.hostname == "vllm" and llm.path.rstrip("/") == "/v1", (name, llm)
        assert "SUB250_API_KEYS" in env and "SUB250_HOSTS" in env, name
        assert svc["restart"] == "unless-stopped", name
        # the drain must end before Docker's SIGKILL
        assert _seconds(svc["stop_grace_period"]) > float(env["SUB250_DRAIN_S"]), name
        assert svc["depends_on"]["db"]["condition"] == "service_healthy", name
        replicas.add(env["SUB250_REPLICA"])
    assert len(replicas) == len(apps), "every replica needs a name of its own (SUB250_REPLICA)"


def test_knowledge_base_is_ingested_once_before_the_replicas(compose):
    ingest = compose["services"]["ingest"]
    # the sample data into an empty database only: a second `up` leaves a user's documents as they are
    assert ingest["command"] == ["ingest", "--sample-if-empty"] and ingest["restart"] == "no"
    for name, svc in _app_services(compose).items():
        assert svc["depends_on"]["ingest"]["condition"] == "service_completed_successfully", name


def test_db_is_pgvector_with_a_healthcheck(compose):
    db = compose["services"]["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


def test_vllm_reserves_a_gpu_and_serves_what_the_profile_asks_for(compose):
    vllm = compose["services"]["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:")
    devices = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), devices
    args = vllm["command"]
    assert "--enable-prefix-caching" in args, args
    spec = [a.split("=", 1)[1] for a in args if a.startswith("--speculative-config=")]
    assert len(spec) == 1 and json.loads(spec[0])["method"] in ("ngram", "eagle", "eagle3", "draft_model"), args
    quant = [a.split("=", 1)[1] for a in args if a.startswith("--quantization=")]
    assert len(quant) == 1 and quant[0].startswith(("awq", "gptq")), args
    # the replicas ask for the name vLLM serves (SUB250_LLM_SERVED_NAME overrides the profile's served_name)
    served = [a.split("=", 1)[1] for a in args if a.startswith("--served-model-name=")]
    asked = {compose["services"][name]["environment"]["SUB250_LLM_SERVED_NAME"] for name in ("app1", "app2")}
    assert len(served) == 1 and asked == set(served), (served, asked)
    mounts = [v for v in vllm["volumes"] if (v["target"] if isinstance(v, dict) else v.split(":")[1]) == "/models"]
    assert mounts and (mounts[0].get("read_only") if isinstance(mounts[0], dict) else mounts[0].endswith(":ro"))
    assert "/health" in " ".join(vllm["healthcheck"]["test"])


def test_lb_publishes_8250_with_the_repository_config(compose):
    lb = compose["services"]["lb"]
    assert lb["image"].startswith("haproxy:2.6")
    ports = [(int(p["published"]), int(p["target"])) if isinstance(p, dict) else tuple(map(int, p.split(":")[-2:]))
             for p in lb["ports"]]
    assert (8250, 8250) in ports, lb["ports"]
    mounted = [v for v in lb["volumes"] if "haproxy.cfg" in str(v)]
    assert mounted and str(HAPROXY_CFG) in str(mounted[0]), lb["volumes"]


def test_lb_servers_are_the_compose_replicas(compose):
    servers = {}
    for line in _haproxy_lines():
        m = re.match(r"server (\S+) (\S+):(\d+)\b", line)
        if m:
            servers[m.group(1)] = (m.group(2), int(m.group(3)))
    apps = _app_services(compose)
    assert {host for host, _ in servers.values()} == set(apps), (servers, sorted(apps))
    assert all(port == 8250 for _, port in servers.values()), servers


# --- deploy/haproxy/haproxy.cfg -------------------------------------------------------------------------------


def test_haproxy_config_is_valid():
    done = subprocess.run([_tool("haproxy", "/usr/sbin/haproxy"), "-c", "-f", str(HAPROXY_CFG)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Configuration file is valid" in done.stdout + done.stderr


def test_haproxy_checks_readiness_and_keeps_draining_sessions():
    lines = _haproxy_lines()
    checks = [ln for ln in lines if ln.startswith(("option httpchk", "http-check send"))]
    paths = set(re.findall(r"(?:\buri |^option httpchk (?:GET|HEAD) )(\S+)", "\n".join(checks), re.M))
    assert paths == {"/readyz"}, checks
    assert "http-check expect status 200" in lines
    assert "balance leastconn" in lines
    assert "option forwardfor" in lines
    assert any(ln.startswith("timeout tunnel ") for ln in lines)
    default_server = next(ln for ln in lines if ln.startswith("default-server "))
    for option in ("check", "inter 1s", "fall 1", "rise 2", "init-addr last,libc,none", "resolvers docker"):
        assert f" {option}" in f" {default_server}", (option, default_server)
    assert "nameserver dns 127.0.0.11:53" in lines
    # a replica leaving the rotation finishes its turns and closes its sessions itself (1001)
    assert not any("shutdown-sessions" in ln for ln in lines)
