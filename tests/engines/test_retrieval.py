"""pgvector + MiniLM retrieval over the sample knowledge base, with 12 known questions."""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.engines

QUESTIONS = json.loads((Path(__file__).resolve().parents[1] / "data" / "kb_questions.json").read_text())


async def test_known_questions_find_their_passage(stack):
    hits_top1 = hits_top3 = 0
    for q in QUESTIONS:
        r = await stack.retriever.retrieve(q["question"], k=3)
        titles = [p.title for p in r.passages]
        hits_top1 += titles[0] == q["title"]
        hits_top3 += q["title"] in titles
        if q["title"] not in titles:
            print(f"miss: {q['question']!r} -> {titles}, wanted {q['title']!r}")
    print(f"top-1 {hits_top1}/{len(QUESTIONS)}, top-3 {hits_top3}/{len(QUESTIONS)}")
    # k=3 passages go into the prompt: at least 10 of the 12 must be among them.
    assert hits_top3 >= 10
    assert hits_top1 >= 7


async def test_retrieval_returns_sources_and_timings(stack):
    r = await stack.retriever.retrieve("What does error E7 mean?")
    assert len(r.passages) == 3
    src = r.passages[0].as_source()
    assert set(src) == {"id", "source", "title", "score"}
    assert src["source"].endswith(".md")
    assert len({p.chunk_id for p in r.passages}) == 3
    assert r.embed_ms > 0 and r.search_ms > 0
    vec = await stack.embedder.run(stack.embedder.embed_one, "What does error E7 mean?")
    nearest = await stack.store.search(vec, 3)
    assert nearest[0].distance <= nearest[1].distance <= nearest[2].distance  # vectors alone: by cosine


async def test_hybrid_search_fuses_words_and_vectors_in_one_query_and_takes_any_text(stack):
    question = "What does error E7 mean?"
    vec = await stack.embedder.run(stack.embedder.embed_one, question)
    fused = await stack.store.hybrid_search(vec, question, 3)
    assert len(fused) == 3 and len({p.chunk_id for p in fused}) == 3
    assert "E7" in fused[0].content  # the word the caller said is in the passage ranked first
    # distances stay cosines (the answer's gate reads them), whatever the fused order
    assert all(0.0 <= p.distance <= 2.0 for p in fused)
    odd = ["", "   ", "or or or", "it's \"quoted\" & (brackets) | !not :*", "-minus +plus", "e" * 10_000,
           "\u00e9l\u00e8ve caf\u00e9 \u6f22\u5b57", "'; DROP TABLE chunks; --"]
    for text in odd:  # never a syntax error: the words are searched for, any of them
        found = await stack.store.hybrid_search(vec, text, 3)
        assert len(found) == 3, text
    assert await stack.store.count() > 0


async def test_reingest_is_idempotent(stack):
    from sub250.rag.ingest import ingest_folder
    from sub250.rag.kb import SAMPLE_KB

    before = await stack.store.count()
    report = await ingest_folder(SAMPLE_KB, stack.store, stack.embedder, model_id=stack.embedding_model_id)
    assert report.documents == 0 and report.skipped >= 6
    assert await stack.store.count() == before


async def test_changed_file_is_replaced_and_removed_file_pruned(stack, tmp_path):
    from sub250.rag.ingest import ingest_folder

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "zz-extra.md").write_text("# Extra\n\n## Zebra Mode\nThe purifier has a secret zebra mode.\n")
    before = await stack.store.count()
    r1 = await ingest_folder(kb, stack.store, stack.embedder, model_id=stack.embedding_model_id)
    assert r1.chunks == 1 and await stack.store.count() == before + 1
    (kb / "zz-extra.md").write_text("# Extra\n\n## Zebra Mode\nChanged.\n\n## Lion Mode\nRoars.\n")
    r2 = await ingest_folder(kb, stack.store, stack.embedder, model_id=stack.embedding_model_id)
    assert r2.chunks == 2 and await stack.store.count() == before + 2
    # Prune against the sample folder again: the extra document goes, the sample stays.
    from sub250.rag.kb import SAMPLE_KB

    r3 = await ingest_folder(SAMPLE_KB, stack.store, stack.embedder, model_id=stack.embedding_model_id, prune=True)
    assert r3.removed == ["zz-extra.md"]
    assert await stack.store.count() == before


async def test_a_kb_s_about_is_stored_at_ingest_and_a_bad_one_stops_it(stack, tmp_path):
    from sub250.errors import ConfigError
    from sub250.rag.about import About, read_about
    from sub250.rag.ingest import ingest_folder
    from sub250.rag.kb import SAMPLE_KB

    halden = read_about(SAMPLE_KB)
    assert await stack.store.about() == (halden.company, halden.scope)  # the test stack's ingest stored it
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "zz-rockets.md").write_text("# Rockets\n\n## Launch\nThe rocket launches at dawn.\n")
    (kb / "about.toml").write_text('company = "Acme"\nscope = "Acme rockets"\n')
    try:
        report = await ingest_folder(kb, stack.store, stack.embedder, model_id=stack.embedding_model_id)
        assert report.about == About("Acme", "Acme rockets") and await stack.store.about() == ("Acme", "Acme rockets")
        (kb / "about.toml").write_text('company = "Acme"\nslogan = "Up!"\n')
        (kb / "zz-rockets.md").write_text("# Rockets\n\n## Launch\nChanged.\n")
        with pytest.raises(ConfigError, match="slogan"):
            await ingest_folder(kb, stack.store, stack.embedder, model_id=stack.embedding_model_id)
        assert await stack.store.about() == ("Acme", "Acme rockets")
        assert [p.content for p in await stack.store.passages() if p.source == "zz-rockets.md"] == [
            "The rocket launches at dawn."]  # nothing of the folder changed
    finally:
        await ingest_folder(SAMPLE_KB, stack.store, stack.embedder, model_id=stack.embedding_model_id, prune=True)
    assert await stack.store.about() == (halden.company, halden.scope)


async def test_the_answer_sentences_of_every_passage_are_warmed_once(stack):
    total = await stack.store.count()
    assert await stack.warm_answers() == min(total, stack.picker.max_passages) > 0
    passage = (await stack.store.passages(1))[0]
    vec = await stack.embedder.run(stack.embedder.embed_one, passage.title)
    got = await stack.picker.pick(vec, [passage])
    assert got is not None and got.chunk_id == passage.chunk_id


async def test_warming_lists_the_kb_s_words_and_the_reranker_puts_the_answering_passage_first(stack):
    await stack.warm_answers()
    v = stack.vocabulary
    assert v is not None and len(v) > 1000
    # the KB's words are known, a subject it never covers is not (the answer's min_score_unfamiliar)
    assert v.unknown("How much does the Aero weigh?") == []
    assert "student" in v.unknown("Does Halden offer a student discount?")
    assert stack.reranker is not None  # the default profile reranks
    # the fused order alone put "Filter Life Warning Will Not Clear" first (docs/BENCHMARKS.md §17)
    r = await stack.retriever.retrieve("um, so how long does the filter last?", k=3)
    assert r.passages[0].title == "When to Replace the Filter"


async def test_the_reranker_s_lexical_term_weighs_an_error_code_by_its_rarity(stack):
    await stack.warm_answers()
    assert stack.reranker.lexical is not None and len(stack.reranker.lexical) == await stack.store.count()
    # without BM25 the "fan ... stopped" words put "Error E1 Fan Motor Stalled" first (docs/BENCHMARKS.md §29)
    r = await stack.retriever.retrieve("The fan suddenly stopped and the screen says E7, what happened?", k=3)
    assert r.passages[0].title == "Error E7 Tip-Over Detected"
