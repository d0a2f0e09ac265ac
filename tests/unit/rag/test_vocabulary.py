from sub250.rag.vocabulary import Vocabulary

KB = ["Halden Care+ Includes. Care+ members get a replacement filter and ten percent off accessories.",
      "Using Amazon Alexa. Say 'Alexa, turn on the purifier' once the Halden skill is linked."]


def test_subject_words_the_kb_never_uses_are_unknown():
    v = Vocabulary.from_texts(KB)
    assert v.unknown("Does Halden offer a student discount?") == ["offer", "student", "discount"]
    assert v.unknown("Does the Philips purifier work with Alexa?") == ["philips", "work"]


def test_function_words_fillers_and_negations_never_count():
    v = Vocabulary.from_texts(KB)
    assert v.unknown("um, so what do Care+ members get?") == []
    assert v.unknown("Isn't the filter included? Won't Alexa turn it on?") == []
    assert v.unknown("uh, can you like order me a pizza real quick?") == ["order", "pizza", "real", "quick"]


def test_words_meet_by_their_first_five_letters_and_case_does_not_matter():
    v = Vocabulary.from_texts(["The Aero weighs six point eight kilograms."])
    assert v.unknown("What is the WEIGHT of the aero?") == []
    assert v.unknown("How heavy is it?") == ["heavy"]
    assert len(v) > 0 and len(Vocabulary.from_texts([])) == 0


def test_a_short_word_meets_the_longer_kb_word_it_begins_and_a_plural_its_singular():
    v = Vocabulary.from_texts(["It costs forty dollars.", "The fan has four speeds."])
    assert v.unknown("What does it cost?") == []
    assert v.unknown("How many fans does it have?") == []
    assert v.knows("cos") and not v.knows("co")  # down to three letters: a beginning of "costs"


def test_subject_stems_are_the_words_compared_cut_to_five_letters_repeats_kept():
    from sub250.rag.vocabulary import subject_stems

    assert subject_stems("Um, so how long does the FILTER last? The filters!") == ["filte", "last", "filte"]
    assert subject_stems("isn't it?") == []
