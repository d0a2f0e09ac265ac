from sub250.rag.lexical import LexicalIndex
from sub250.rag.store import RetrievedPassage


def P(chunk_id, title, content):
    return RetrievedPassage(chunk_id, "kb.md", title, content, 0.0)


E1 = P(1, "Error E1 Fan Motor Stalled", "The fan motor tried to start but could not turn. Unplug the fan.")
E7 = P(2, "Error E7 Tip-Over Detected", "The purifier stops the fan when it is tipped over.")
FILTER = P(3, "When to Replace the Filter", "Replace the filter every nine months.")
KB = [E1, E7, FILTER]


def test_a_rare_word_of_the_question_outweighs_a_common_one():
    index = LexicalIndex(KB)
    # "fan" is in every error passage, "E7" in one: BM25's inverse document frequency tells them apart
    e1, e7, filt = index.scores("The fan suddenly stopped and the screen says E7, what happened?", [E1, E7, FILTER])
    assert e7 > e1 > 0 and filt == 0
    assert len(index) == 3


def test_scores_follow_the_order_given_and_words_meet_by_their_first_five_letters():
    index = LexicalIndex(KB)
    forward = index.scores("when do I replace filters", [FILTER, E1])
    assert forward[0] > 0 and forward[1] == 0
    assert index.scores("when do I replace filters", [E1, FILTER]) == forward[::-1]


def test_what_has_no_subject_word_or_no_index_scores_zero():
    index = LexicalIndex(KB)
    assert index.scores("um, so what is it?", KB) == [0.0, 0.0, 0.0]  # fillers and function words only
    assert index.scores("", KB) == [0.0, 0.0, 0.0]
    assert index.scores("pizza delivery", KB) == [0.0, 0.0, 0.0]  # words the KB never uses
    stored_later = P(9, "Error E9", "E9 means the sensor failed.")
    assert index.scores("what is E9?", [stored_later]) == [0.0]
    assert LexicalIndex([]).scores("E7", [E7]) == [0.0]
    assert LexicalIndex([P(1, "", "the and of")]).scores("E7", [E7]) == [0.0]
