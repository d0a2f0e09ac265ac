"""The stream token (app/telephony/stream_token.py): it opens its own call's stream, within its time, and only
if minted with the auth token."""

from sub250.telephony import stream_token as st

SECRET = "auth-token"


def test_a_token_opens_its_own_call_within_its_time():
    token = st.mint(SECRET, "CA1", now=1000.0)
    assert st.check(SECRET, "CA1", token, now=1000.0 + st.TOKEN_TTL_S) is None
    assert "expired" in st.check(SECRET, "CA1", token, now=1001.0 + st.TOKEN_TTL_S)
    assert "not minted for this call" in st.check(SECRET, "CA2", token, now=1000.0)
    assert "not minted for this call" in st.check("another-token", "CA1", token, now=1000.0)


def test_a_made_up_or_missing_token_is_refused():
    assert "no sub250_token" in st.check(SECRET, "CA1", None)
    assert "no sub250_token" in st.check(SECRET, "CA1", "")
    assert "malformed" in st.check(SECRET, "CA1", "abc")
    assert "malformed" in st.check(SECRET, "CA1", "123.")
    assert "not minted" in st.check(SECRET, "CA1", "99999999999.00")
    # a later expiry cannot be written in without the secret
    expires, mac = st.mint(SECRET, "CA1", now=1000.0).split(".")
    assert "not minted" in st.check(SECRET, "CA1", f"{int(expires) + 3600}.{mac}", now=1000.0)
