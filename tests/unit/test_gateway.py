import pytest
from multidict import CIMultiDict

from sub250.gateway import Admission, ApiKeys, GatewayLimits, KeyLimiter, extract_key, select_subprotocol
from sub250.gateway.admission import host_name


def test_keys_are_checked_and_extracted_from_each_carrier(tmp_path):
    keys = ApiKeys(["sk-a"])
    assert keys.authenticate("sk-a") is not None and keys.authenticate("sk-b") is None
    assert keys.authenticate(None) is None
    assert ApiKeys([], allow_anonymous=True).authenticate(None).dev
    assert extract_key(CIMultiDict({"authorization": "Bearer sk-a"}), {}) == "sk-a"
    assert extract_key({"Authorization": "bearer   sk-a "}, {}) == "sk-a"
    proto = "openai-insecure-api-key.sk-a"
    assert extract_key({"Sec-WebSocket-Protocol": f"realtime, {proto}"}, {}) == "sk-a"
    assert extract_key({}, {"model": "x", "api_key": "sk-a"}) == "sk-a"
    # order: header, then subprotocol, then query; other schemes and empty values carry nothing
    assert extract_key({"Authorization": "Bearer sk-h", "Sec-WebSocket-Protocol": proto}, {"api_key": "q"}) == "sk-h"
    assert extract_key({"Authorization": "Basic abc"}, {"api_key": "sk-q"}) == "sk-q"
    assert extract_key({"Authorization": "Bearer ", "Sec-WebSocket-Protocol": "openai-insecure-api-key."}, {}) is None
    # the subprotocol echoed: realtime when offered, else the key's one
    assert select_subprotocol({"Sec-WebSocket-Protocol": f"{proto}, realtime"}) == "realtime"
    assert select_subprotocol({"Sec-WebSocket-Protocol": proto}) == proto
    assert select_subprotocol({"Sec-WebSocket-Protocol": "other"}) is None and select_subprotocol({}) is None


def test_host_allow_list_defeats_dns_rebinding():
    assert host_name("Example.COM:8250") == "example.com" and host_name("[::1]:8250") == "::1"
    assert host_name("::1") == "::1" and host_name("name.") == "name" and host_name("") is None
    adm = Admission(ApiKeys(["k"]), GatewayLimits(origins=("http://page.example",)), bind_host="myhost.lan")
    for ok in ("127.0.0.1:8250", "localhost", "[::1]:8250", "myhost.lan:8250", "MYHOST.LAN", "192.0.2.7:80",
               "[2001:db8::1]:8250", None):
        assert adm.host_allowed(ok), ok
    for bad in ("evil.example:8250", "localhost.evil.example", "127.0.0.1.nip.io", ""):
        assert not adm.host_allowed(bad), bad
    # bound to every address: no name is known; SUB250_HOSTS lists them (ports ignored), * allows any
    wild = Admission(ApiKeys(["k"]), GatewayLimits(hosts=("voice.example.com:443",)), bind_host="0.0.0.0")
    assert wild.host_allowed("voice.example.com") and not wild.host_allowed("0.0.0.0.evil") and \
        not wild.host_allowed("other.example")
    assert Admission(ApiKeys(["k"]), GatewayLimits(hosts=("*",)), bind_host="0.0.0.0").host_allowed("any.example")
    # Origin: none (SDKs), listed, or same origin, the last only when the Host is one of ours
    assert adm.origin_allowed(None, "evil.example")
    assert adm.origin_allowed("http://page.example", "127.0.0.1:8250")
    assert adm.origin_allowed("http://127.0.0.1:8250", "127.0.0.1:8250")
    assert not adm.origin_allowed("http://127.0.0.1:9", "127.0.0.1:8250")
    assert not adm.origin_allowed("http://evil.example:8250", "evil.example:8250")
    assert adm.check_request({"Host": "evil.example:1", "Origin": "http://evil.example:1"}).code == "host_not_allowed"
    assert adm.check_request({"Host": "127.0.0.1:1", "Origin": "http://evil.example:1"}).code == "origin_not_allowed"
    assert adm.check_request({"Host": "127.0.0.1:1"}) is None


def test_authentication_refusals():
    keys = ApiKeys(["sk-a"])
    adm = Admission(keys, GatewayLimits(), bind_host="127.0.0.1")
    assert adm.authenticate({"Authorization": "Bearer sk-a"}, {}) == keys.authenticate("sk-a")
    refused = adm.authenticate({}, {"api_key": "nope"})
    assert (refused.code, refused.http_status) == ("invalid_api_key", 401)
    secret, _ = keys.mint(keys.authenticate("sk-a"))
    assert adm.authenticate({"Authorization": f"Bearer {secret}"}, {}) == keys.authenticate("sk-a")
    refused = adm.authenticate({"Authorization": f"Bearer {secret}"}, {}, allow_client_secret=False)
    assert (refused.code, refused.http_status) == ("client_secret_not_allowed", 403)


def test_local_key_is_created_once_and_private(tmp_path):
    f = tmp_path / "api_keys"
    k1 = ApiKeys.create_local_key(f)
    assert k1 == ApiKeys.create_local_key(f)
    assert oct(f.stat().st_mode & 0o777) == "0o600"
    assert ApiKeys.load("", f).authenticate(k1) is not None


def test_session_limit_and_release():
    lim = KeyLimiter(GatewayLimits(max_sessions_per_key=1))
    assert lim.open_session("k") is None
    assert lim.open_session("k").code == "session_limit"
    assert lim.open_session("other") is None
    lim.close_session("k")
    assert lim.open_session("k") is None


def test_message_size_rate_and_audio_rate():
    lim = KeyLimiter(GatewayLimits(max_event_bytes=100, messages_per_s=1, burst=2, max_audio_rate=1.0))
    assert lim.check_message("k", 101).code == "event_too_large"
    assert lim.check_message("k", 10) is None and lim.check_message("k", 10) is None
    assert lim.check_message("k", 10).code == "rate_limit_exceeded"
    assert lim.check_audio("k", 9.0) is None  # burst of 10 s
    assert lim.check_audio("k", 2.0).code == "audio_rate_exceeded"


def test_client_secrets_open_sessions_until_they_expire():
    from sub250.gateway.auth import ApiKeys

    keys = ApiKeys(["sk-sub250-alpha-000000000000"])
    owner = keys.authenticate("sk-sub250-alpha-000000000000")
    token, exp = keys.mint(owner, 60, now=1_000_000)
    assert token.startswith("ek_") and exp == 1_000_060
    assert keys._verify_token(token, now=1_000_059) == owner  # same key, same limits
    assert keys._verify_token(token, now=1_000_061) is None  # expired
    assert keys.authenticate(token) is None  # minted "in the past": long expired now
    fresh, _ = keys.mint(owner, 60)
    assert keys.authenticate(fresh) == owner
    body, _, sig = fresh.partition(".")
    assert keys.authenticate(body + "." + sig[::-1]) is None  # forged signature
    assert keys.authenticate(body.replace("ek_", "ek_x") + "." + sig) is None  # altered claims
    assert ApiKeys(["sk-sub250-alpha-000000000000"]).authenticate(fresh) is None  # another process's secret
    for bad in (5, 100_000):
        try:
            keys.mint(owner, bad)
        except ValueError as exc:
            assert "between" in str(exc)
        else:
            raise AssertionError(f"ttl {bad} accepted")


def test_a_secrets_session_is_kept_by_the_server_until_it_expires():
    from sub250.gateway.auth import ApiKeys, Principal

    keys = ApiKeys(["sk-x"])
    token, exp = keys.mint(Principal("abc"), 60, now=1000.0, session={"instructions": "hi"})
    p = keys._verify_token(token, now=1001.0)
    assert p.key_id == "abc" and p.session_object() == {"instructions": "hi"}
    assert keys._verify_token(token, now=exp + 1) is None  # expired
    keys.mint(Principal("abc"), 60, now=exp + 100.0)  # no session: nothing stored, nothing pruned
    keys.mint(Principal("abc"), 60, now=exp + 100.0, session={})  # minting prunes the expired ones
    assert len(keys._secret_sessions) == 1
    assert keys._verify_token(token, now=1001.0) is None  # its session is gone: the secret no longer opens


def test_rate_limits_say_the_burst_what_is_left_and_when_it_is_full_again():
    from sub250.gateway import GatewayLimits, KeyLimiter

    limiter = KeyLimiter(GatewayLimits(messages_per_s=10.0))
    (requests,) = limiter.rate_limits("k")  # the API's names only: requests (no token limit here)
    assert requests["name"] == "requests" and requests["remaining"] == requests["limit"] > 0
    assert isinstance(requests["limit"], int) and isinstance(requests["remaining"], int)
    assert requests["reset_seconds"] == 0.0
    for _ in range(5):
        assert limiter.check_message("k", 10) is None
    (requests,) = limiter.rate_limits("k")
    assert requests["remaining"] in (requests["limit"] - 5, requests["limit"] - 6)  # whole messages, refilling
    assert 0.45 < requests["reset_seconds"] <= 0.5  # 5 messages at 10 per second


def test_secrets_with_a_session_are_bounded(monkeypatch):
    from sub250.gateway import auth
    from sub250.gateway.auth import ApiKeys, Principal, TooManySecrets

    monkeypatch.setattr(auth, "MAX_SECRET_SESSIONS", 2)
    keys = ApiKeys(["sk-x"])
    for _ in range(2):
        keys.mint(Principal("abc"), 60, now=1000.0, session={})
    with pytest.raises(TooManySecrets, match="at most 2"):
        keys.mint(Principal("abc"), 60, now=1000.0, session={})
    keys.mint(Principal("abc"), 60, now=1000.0)  # a secret without a session is not held: always minted
    keys.mint(Principal("abc"), 60, now=2000.0, session={})  # once the others expired
