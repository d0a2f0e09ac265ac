"""The one-machine HAProxy config is the production one (deploy/haproxy/haproxy.cfg) with local addresses."""

import subprocess

import pytest

from sub250.fleet import haproxy

SERVERS = [("replica-1", "127.0.0.1", 9101), ("replica-2", "127.0.0.1", 9102)]


def directives(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_local_config_keeps_every_production_directive_but_the_addresses():
    local = directives(haproxy.config(bind="127.0.0.1:9000", stats_bind="127.0.0.1:9001", servers=SERVERS))
    production = directives(haproxy.PRODUCTION.read_text())
    dropped = [d for d in production if d not in local]
    assert all(d.startswith(("bind ", "server ", "default-server ", "resolvers ", "nameserver ", "resolve_retries",
                             "timeout resolve", "timeout retry", "hold ")) for d in dropped), dropped
    assert "bind 127.0.0.1:9000" in local and "bind 127.0.0.1:9001" in local
    assert "default-server check inter 1s fall 1 rise 2" in local
    assert [d for d in local if d.startswith("server ")] == ["server replica-1 127.0.0.1:9101 cookie replica-1",
                                                             "server replica-2 127.0.0.1:9102 cookie replica-2"]
    for needed in ("http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost", "timeout tunnel 1h",
                   "retry-on conn-failure empty-response 503", "balance leastconn"):
        assert needed in local


def test_haproxy_accepts_the_local_config(tmp_path):
    program = haproxy.binary()
    if program is None:
        pytest.fail("haproxy is not installed; install it with: bash scripts/install-fleet-tools.sh")
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(haproxy.config(bind="127.0.0.1:9000", stats_bind="127.0.0.1:9001", servers=SERVERS))
    done = subprocess.run([program, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
