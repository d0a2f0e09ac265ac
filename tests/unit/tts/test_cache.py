"""The speech cache: a chunk said before is not synthesized again; bounded by bytes, least recently used out."""

import threading

import pytest

from app.errors import ConfigError
from app.tts.base import AudioChunk, TTSEngine
from app.tts.cache import SpeechCache
from app.tts.piper import cache_bytes


def chunk(n_bytes):
    return (AudioChunk(pcm16=bytes(n_bytes), sample_rate=22050),)


class CountingTTS(TTSEngine):
    sample_rate = 22050

    def __init__(self, cache_bytes=0):
        super().__init__(workers=1, cache_bytes=cache_bytes)
        self.texts = []

    def load(self):
        pass

    def synthesize(self, text):
        self.texts.append(text)
        yield AudioChunk(pcm16=bytes(100 * len(text)), sample_rate=self.sample_rate)


def test_the_cache_keeps_what_fits_and_drops_the_least_recently_used():
    cache = SpeechCache(max_bytes=300)
    cache.put("a", chunk(100))
    cache.put("b", chunk(100))
    cache.put("c", chunk(100))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("d", chunk(100))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("d") is not None
    assert cache.bytes == 300 and len(cache) == 3
    cache.put("huge", chunk(301))  # larger than the whole budget: not kept, nothing dropped for it
    assert cache.get("huge") is None and len(cache) == 3
    cache.put("a", chunk(50))  # replaced: its old size is given back
    assert cache.bytes == 250
    assert (cache.hits, cache.misses) == (3, 2)


def test_a_text_said_before_is_not_synthesized_again():
    tts = CountingTTS(cache_bytes=10_000)
    first = tts.speak("Sorry, I can only help")
    again = tts.speak("Sorry, I can only help")
    assert first == again and tts.texts == ["Sorry, I can only help"]
    assert tts.warm(["Sorry, I can only help", "with questions about Halden."]) == 2
    assert tts.texts == ["Sorry, I can only help", "with questions about Halden."]


def test_without_a_cache_every_chunk_is_synthesized():
    tts = CountingTTS()
    tts.speak("Hello there.")
    tts.speak("Hello there.")
    assert tts.texts == ["Hello there."] * 2 and tts.cache is None and tts.warm(["x"]) == 0


def test_threads_share_the_cache_safely():
    cache = SpeechCache(max_bytes=50 * 1000)

    def work(k):
        for i in range(500):
            cache.put(f"{k}-{i % 80}", chunk(1000))
            cache.get(f"{(k + 1) % 4}-{i % 80}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.bytes == 1000 * len(cache) <= 50 * 1000


@pytest.mark.parametrize("value", [-1, 10**6, "lots", True, [32]])
def test_a_bad_cache_size_is_a_config_error(value):
    with pytest.raises(ConfigError):
        cache_bytes({"cache_mb": value})


def test_cache_size_in_mib():
    assert cache_bytes({}) == 0 and cache_bytes({"cache_mb": 32}) == 32 * 2**20
    assert cache_bytes({"cache_mb": 0.5}) == 2**19


async def test_the_fixed_replies_are_warmed_as_the_speaker_cuts_them():
    from app.config import Settings
    from app.stack import Stack
    from app.tts.chunker import SentenceChunker

    stack = Stack.from_settings(Settings(profile="cpu-base"))
    stack.tts = CountingTTS(cache_bytes=10**7)
    held = await stack.warm_speech()
    policy = stack.profile.stage("answer")
    from app.answer.policy import DECLINE_TEXT, IDLE_TEXT

    want = []
    for text in (policy.get("decline_text", DECLINE_TEXT), policy.get("idle_text", IDLE_TEXT)):
        c = SentenceChunker(first_clause=True)
        want += c.push(text) + c.flush()
    assert stack.tts.texts == want and held == len(set(want)) and len(want) >= 3
    assert want[0] == "Sorry, I can only help with"  # the decline's first clause: its first audio
    stack.tts.close_threads()
