"""The end-of-turn model's inputs (app/turn_model/features.py): the same text gives the same inputs, in training
and serving; the caller's tokens are found in the pair whatever the context."""

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
    def __init__(self, context_len, user_len):
        n = 1 + context_len + 1 + user_len + 1  # [CLS] context [SEP] user [SEP]
        self.ids = list(range(100, 100 + n))
        self.attention_mask = [1] * n
        self.type_ids = [0] * (context_len + 2) + [1] * (user_len + 1)


class _Tokenizer:
    def __init__(self, shapes):
        self.shapes = shapes

    def encode_batch(self, pairs):
        return [_Encoding(*s) for s in self.shapes]


class _Session:
    """Each token's state is its id (in every dimension): the pooling is then checkable by hand."""

    def run(self, _, feeds):
        ids = feeds["input_ids"].astype(np.float32)
        return [np.repeat(ids[..., None], 384, axis=2)]


def test_encoder_states_pool_the_callers_tokens_and_take_its_last():
    shapes = [(2, 3), (0, 1), (4, 0)]
    states = F.encoder_states(_Tokenizer(shapes), _Session(), ["a b c", "d", ""], ["x y", "", "p q r s"])
    assert states.shape == (3, 768)
    # pair 0: [CLS]=100, x=101 y=102 [SEP]=103, user 104 105 106, [SEP]=107
    assert states[0, 0] == pytest.approx(105.0) and states[0, 384] == pytest.approx(106.0)
    # pair 1: [CLS]=100 [SEP]=101 user 102 [SEP]=103
    assert states[1, 0] == pytest.approx(102.0) and states[1, 384] == pytest.approx(102.0)
    # no caller words: zeros for the mean, the [CLS] state for the last
    assert states[2, 0] == 0.0 and states[2, 384] == pytest.approx(100.0)
