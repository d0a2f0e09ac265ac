"""The sentence chunker: LLM deltas in, speakable chunks out (first clause first)."""

from sub250.tts.chunker import SentenceChunker


def test_chunker_splits_sentences_as_they_complete():
    c = SentenceChunker()
    out = []
    for piece in ["The filter lasts ", "nine months. Replace", " it when the light", " turns amber! Thanks"]:
        out += c.push(piece)
    assert out == ["The filter lasts nine months.", "Replace it when the light turns amber!"]
    assert c.flush() == ["Thanks"]
    assert c.flush() == []


def test_chunker_keeps_decimals_and_initials_together():
    c = SentenceChunker()
    assert c.push("It draws 1.5 amps in the U.S. market. Yes ") == ["It draws 1.5 amps in the U.S. market."]


def test_first_clause_goes_first_then_sentences():
    c = SentenceChunker(first_clause=True)
    out = []
    for piece in ["Yes, ", "the TriLayer filter lasts", " about nine months. Replace it", " when the ring turns amber. "]:
        out += c.push(piece)
    # "Yes," is too short to speak alone; six words come before the sentence ends
    assert out == ["Yes, the TriLayer filter lasts about", "nine months.", "Replace it when the ring turns amber."]
    c = SentenceChunker(first_clause=True)
    out = []
    for piece in ["The TriLayer filter, ", "which you replace yearly, ", "costs forty dollars. ", "Thanks. "]:
        out += c.push(piece)
    assert out == ["The TriLayer filter,", "which you replace yearly, costs forty dollars."]
    assert c.flush() == ["Thanks."]  # shorter than min_chars: waits for more text or the end


def test_first_chunk_after_six_words_without_punctuation():
    c = SentenceChunker(first_clause=True)
    out = []
    for w in "To put the purifier into pairing mode you hold the button".split():
        out += c.push(w + " ")
    assert out == ["To put the purifier into pairing"]
    assert c.flush() == ["mode you hold the button"]


def test_a_short_first_sentence_is_taken_whole():
    c = SentenceChunker(first_clause=True)
    assert c.push("Yes, it does. More later") == ["Yes, it does."]


def test_no_chunk_is_longer_than_max_words_and_long_sentences_cut_at_clauses():
    from sub250.tts.chunker import SentenceChunker, split_long

    long = ("The purifier cleans the air in your room, and it does so quietly because the fan is large, "
            "so you can sleep well while it runs all night long in the bedroom. Next.")
    assert split_long("one two three", 5) == ["one two three"]
    pieces = split_long(long, 12)
    assert all(len(p.split()) <= 12 for p in pieces) and " ".join(pieces) == long
    assert pieces[0].endswith("room,")  # at the clause end inside the limit
    c = SentenceChunker(max_words=12)
    out = []
    for word in long.split(" "):
        out += c.push(word + " ")
    out += c.flush()
    assert all(len(p.split()) <= 12 for p in out) and " ".join(out) == long
    run_on = SentenceChunker(max_words=5)
    said = run_on.push("a b c d e f g h i j k l ")  # no sentence end at all
    assert said and all(len(p.split()) <= 5 for p in said)
    assert " ".join(said + run_on.flush()) == "a b c d e f g h i j k l"



def test_a_run_on_that_repeats_its_own_words_is_said_once():
    from sub250.tts.chunker import SentenceChunker

    c = SentenceChunker(max_words=3)
    said = []
    for word in "x y z x y z x y".split():
        said += c.push(word + " ")
    said += c.flush()
    assert " ".join(said) == "x y z x y z x y"  # the tail is kept by position, never found again earlier
