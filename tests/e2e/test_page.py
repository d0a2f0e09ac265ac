"""The demo page in a real browser: Debian's Chromium, headless, driven by Playwright, with a WAV file as
its microphone, against the real server. Once over WebRTC (the default) and once over WebSocket.

A screenshot of the page after the turn is kept in ``reports/test-artifacts/`` (git-ignored)."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "reports" / "test-artifacts"
SPANS = ["network_rtt", "gateway", "asr_finalize", "retrieval", "prompt", "prefill", "ttft", "ttft_client"]


@pytest.fixture(scope="module")
def mic_wav(speak, tmp_path_factory) -> Path:
    """The fake microphone: 48 kHz mono PCM16, 3 s of silence (the page connects meanwhile), the
    question, then silence for the endpointer."""
    import soxr

    data, rate = sf.read(speak("How long does the filter last?"), dtype="float32")
    speech = soxr.resample(data, rate, 48000)
    audio = np.concatenate([np.zeros(3 * 48000, np.float32), speech, np.zeros(4 * 48000, np.float32)])
    path = tmp_path_factory.mktemp("mic") / "question-48k.wav"
    sf.write(path, audio, 48000, subtype="PCM_16")
    return path


async def _launch(playwright, wav: Path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: `make test` installs Debian's chromium package "
                    "(scripts/install-browser.sh)")
    return await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={wav}%noloop",
        "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns",
        "--autoplay-policy=no-user-gesture-required",
    ])


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("transport", ["webrtc", "websocket"])
async def test_page_voice_turn(server, mic_wav, transport):
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await _launch(pw, mic_wav)
        try:
            page = await browser.new_page(viewport={"width": 1200, "height": 900})
            console: list[str] = []
            page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
            page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
            await page.goto(f"{server.url}/?transport={transport}#key={TEST_KEY}")
            assert await page.title() == "sub250 — voice demo"
            assert TEST_KEY not in page.url, "the key must leave the address bar"
            await page.click("#start")
            try:
                await page.wait_for_function("window.sub250Page.status.startsWith('listening')", timeout=20_000)
                # the caller's words, then a grounded answer
                user = page.locator(".msg.user .text").first
                await user.wait_for(timeout=90_000)
                assert "filter" in (await user.text_content()).lower()
                await page.wait_for_function(
                    "window.sub250Page.turns.length >= 1 && window.sub250Page.clientTurns.length >= 1",
                    timeout=90_000)
                answer = await page.locator(".msg.assistant .text").first.text_content()
                assert len(answer.split()) >= 3, answer
                assert await page.locator("#sources li").count() >= 1
                # the waterfall: one row per span of LATENCY.md, with the server's numbers
                for span in SPANS:
                    row = page.locator(f"#waterfall .wf-row[data-span='{span}']")
                    assert await row.count() == 1, span
                report = await page.evaluate("window.sub250Page.turns[0]")
                shown = await page.locator("#waterfall .wf-row[data-span='ttft'] ").get_attribute("data-ms")
                assert float(shown) == pytest.approx(report["spans"]["ttft"])
                assert await page.locator("#waterfall .wf-budget").count() == len(SPANS)
                # figures the browser measured itself
                client_turn = await page.evaluate("window.sub250Page.clientTurns[0]")
                assert client_turn["transport"] == transport
                assert client_turn["ttftBrowserMs"] is not None and client_turn["ttftBrowserMs"] > 0
                assert client_turn["rttMs"] is not None and client_turn["rttMs"] >= 0
                # reply audio reached the browser
                if transport == "webrtc":
                    await page.wait_for_function(
                        "(window.sub250Page.client.stats.audioEnergy || 0) > 0.001", timeout=30_000)
                else:
                    received = await page.evaluate("window.sub250Page.client.stats.audioReceivedMs")
                    assert received > 500, received
                assert await page.evaluate("window.sub250Page.micLevel") is not None
                assert await page.locator("#error").is_hidden(), await page.locator("#error").text_content()
            finally:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                shot = ARTIFACTS / f"page-{transport}.png"
                await page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot: {shot}\nbrowser console:\n" + "\n".join(console[-30:]))
            await page.click("#start")  # Stop: the call is hung up and the server forgets it
            await page.wait_for_function("window.sub250Page.status === 'idle'", timeout=10_000)
        finally:
            await browser.close()
    if transport == "webrtc":
        import asyncio

        for _ in range(100):
            if not server.calls:
                break
            await asyncio.sleep(0.1)
        assert server.calls == {}


@pytest.fixture(scope="module")
def barge_in_wav(speak, tmp_path_factory) -> Path:
    """A question, then - while the reply plays - the caller talks over it."""
    import soxr

    def at48k(text):
        data, rate = sf.read(speak(text), dtype="float32")
        return soxr.resample(data, rate, 48000)

    question = at48k("Can you tell me everything about how the warranty works and what it covers?")
    interruption = at48k("Wait, stop. I have another question about my order.")
    audio = np.concatenate([np.zeros(3 * 48000, np.float32), question, np.zeros(int(3.5 * 48000), np.float32),
                            interruption, np.zeros(4 * 48000, np.float32)])
    path = tmp_path_factory.mktemp("mic") / "barge-in-48k.wav"
    sf.write(path, audio, 48000, subtype="PCM_16")
    return path


@pytest.mark.asyncio(loop_scope="session")
async def test_page_says_how_much_of_the_reply_was_heard_when_talked_over(server, barge_in_wav):
    """Over a WebSocket the page plays the reply; talked over, it stops and sends conversation.item.truncate
    with what it had played, and the server cuts its history to that."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await _launch(pw, barge_in_wav)
        try:
            page = await browser.new_page()
            await page.goto(f"{server.url}/?transport=websocket#key={TEST_KEY}")
            await page.click("#start")
            await page.wait_for_function("window.sub250Page.client && "
                                         "window.sub250Page.client.truncations.length >= 1", timeout=120_000)
            cut = await page.evaluate("window.sub250Page.client.truncations[0]")
            assert cut["type"] == "conversation.item.truncate" and cut["content_index"] == 0
            assert 0 < cut["audio_end_ms"] < cut["receivedMs"], cut
            # the server cut the reply's item to what was heard (the page shows conversation.item.truncated)
            await page.wait_for_function("window.sub250Page.truncated.length >= 1", timeout=10_000)
            assert await page.evaluate("window.sub250Page.truncated[0].item_id") == cut["item_id"]
            assert await page.locator("#error").is_hidden(), await page.locator("#error").text_content()
        finally:
            await browser.close()
