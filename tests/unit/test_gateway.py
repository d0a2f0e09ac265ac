from app.gateway import ApiKeys, GatewayLimits, KeyLimiter, extract_key


class H(dict):
    def get(self, k, d=None):
        return super().get(k, d)


def test_keys_are_checked_and_extracted_from_each_carrier(tmp_path):
    keys = ApiKeys(["sk-a"])
    assert keys.authenticate("sk-a") is not None and keys.authenticate("sk-b") is None
    assert keys.authenticate(None) is None
    assert ApiKeys([], allow_anonymous=True).authenticate(None).dev
    assert extract_key(H({"Authorization": "Bearer sk-a"}), "/v1/realtime") == ("sk-a", None)
    proto = "openai-insecure-api-key.sk-a"
    assert extract_key(H({"Sec-WebSocket-Protocol": f"realtime, {proto}"}), "/") == ("sk-a", proto)
    assert extract_key(H(), "/v1/realtime?model=x&api_key=sk-a") == ("sk-a", None)


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
    from app.gateway.auth import ApiKeys

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
