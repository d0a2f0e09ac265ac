from sub250.rag.kb import SAMPLE_KB, parse_document, read_folder


def test_sample_knowledge_base_has_over_100_unique_passages():
    docs = read_folder(SAMPLE_KB)
    passages = [p for d in docs for p in d.passages]
    assert len(passages) >= 100
    titles = [p.title for p in passages]
    assert len(set(titles)) == len(titles)
    topics = {d.source for d in docs}
    assert {"setup.md", "accounts-billing.md", "troubleshooting.md", "returns.md", "warranty.md"} <= topics
    assert all(len(p.content.split()) >= 20 for p in passages)


def test_sections_become_passages_and_hash_is_stable():
    text = "# Doc\n\n## One\nFirst   para\ncontinues.\n\n## Two\nSecond.\n"
    doc = parse_document(text, "x.md")
    assert doc.title == "Doc"
    assert [(p.title, p.content) for p in doc.passages] == [("One", "First para continues."), ("Two", "Second.")]
    assert doc.sha256 == parse_document(text, "x.md").sha256
    assert doc.sha256 != parse_document(text + "more", "x.md").sha256


def test_plain_text_splits_on_paragraphs():
    doc = parse_document("alpha beta\n\ngamma\n\n\n", "notes.txt")
    assert [p.content for p in doc.passages] == ["alpha beta", "gamma"]
