"""The end-of-turn model's inputs (app/turn_model/features.py): the same text gives the same inputs, in training
and serving; the caller's tokens are pooled without [CLS] and [SEP]."""

import numpy as np
import pytest

from sub250.turn_model import features as F


@pytest.mark.parametrize("text, said", [
    ("How far from the?", "how far from the"),
    ("  Where's my ORDER, 48213?!  ", "where's my order 48213"),
    ("'quoted' words -- and dashes_here", "quoted words and dashes here"),
    ("...", ""),
])
def test_words_are_taken_as_said(text, said):
    assert F.said(text) == said


def test_last_words_keeps_the_end():
    assert F.last_words("one two three four", 2) == "three four"


def test_hashed_features_are_stable_and_in_range():
    a = F.hashed("where is my order")
    assert a == F.hashed("where is my order"), "the same words, the same buckets (crc32: no per-process salt)"
    assert len(a) == F.HASH_GROUPS and all(g * F.HASH_BUCKETS <= i < (g + 1) * F.HASH_BUCKETS for g, i in enumerate(a))
    assert F.hashed("where is my")[0] != a[0], "the last word counts"
    assert F.hashed("") == [3 * F.HASH_BUCKETS + F.hashed("")[0] % F.HASH_BUCKETS]


class _Encoding:
    def __init__(self, user_len):
        n = 1 + user_len + 1  # [CLS] user [SEP]
        self.ids = list(range(100, 100 + n))
        self.attention_mask = [1] * n


class _Tokenizer:
    def __init__(self, lengths):
        self.lengths = lengths

    def encode_batch(self, texts):
        assert len(texts) == len(self.lengths)
        return [_Encoding(n) for n in self.lengths]


class _Session:
    """Each token's state is its id (in every dimension): the pooling is then checkable by hand."""

    def run(self, _, feeds):
        assert not feeds["token_type_ids"].any(), "one sequence: every token of type 0"
        ids = feeds["input_ids"].astype(np.float32)
        return [np.repeat(ids[..., None], 384, axis=2)]


def test_encoder_states_pool_the_callers_tokens_and_take_its_last():
    states = F.encoder_states(_Tokenizer([3, 1, 0]), _Session(), ["a b c", "d", ""])
    assert states.shape == (3, 768)
    # 0: [CLS]=100, words 101 102 103, [SEP]=104 (the padding after the shorter rows is not read)
    assert states[0, 0] == pytest.approx(102.0) and states[0, 384] == pytest.approx(103.0)
    # 1: [CLS]=100, word 101, [SEP]=102
    assert states[1, 0] == pytest.approx(101.0) and states[1, 384] == pytest.approx(101.0)
    # no caller words: zeros for the mean, the [CLS] state for the last
    assert states[2, 0] == 0.0 and states[2, 384] == pytest.approx(100.0)


def test_the_tokenizer_keeps_the_callers_last_words(settings):
    from sub250.modelstore import prepare
    from sub250.profiles import load_profile

    m = prepare(load_profile("cpu-base"), settings.models_dir, stages=("embedder",))["embedder"]
    tokenizer = F.tokenizer_for(str(m["tokenizer"]))
    long = " ".join(["word"] * 200) + " the very end"
    enc = tokenizer.encode(long)
    assert len(enc.ids) == F.MAX_TOKENS
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-4:] == ["the", "very", "end", "[SEP]"]
