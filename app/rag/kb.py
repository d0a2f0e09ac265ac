"""Reading a knowledge base folder into passages (chunks).

Markdown files: ``# Document title`` then sections ``## Passage title`` each followed by prose; one
section is one chunk. A file without ``##`` sections is split into paragraph chunks. Plain ``.txt``
files are split into paragraphs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

KB_SUFFIXES = (".md", ".txt")
#: The sample knowledge base shipped with the repository.
SAMPLE_KB = Path(__file__).resolve().parent.parent.parent / "kb"


@dataclass(frozen=True)
class Passage:
    ordinal: int
    title: str
    content: str
    metadata: dict = field(default_factory=dict)

    @property
    def embed_text(self) -> str:
        # Title + body: the title carries the topic words a caller uses.
        return f"{self.title}. {self.content}"


@dataclass(frozen=True)
class Document:
    source: str
    title: str
    sha256: str
    passages: list[Passage]


def parse_document(text: str, source: str) -> Document:
    sha = hashlib.sha256(text.encode()).hexdigest()
    lines = text.splitlines()
    doc_title = Path(source).stem.replace("-", " ").title()
    sections: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for line in lines:
        if line.startswith("# ") and not sections and current is None:
            doc_title = line[2:].strip()
            continue
        if line.startswith("## "):
            current = (line[3:].strip(), [])
            sections.append(current)
            continue
        if current is not None:
            current[1].append(line)
    passages: list[Passage] = []
    if sections:
        for title, body in sections:
            content = _squash(" ".join(body))
            if content:
                passages.append(Passage(len(passages), title, content, {"document": doc_title}))
    else:
        text = "\n".join(ln for ln in lines if not ln.startswith("# "))
        for para in re.split(r"\n\s*\n", text):
            content = _squash(para)
            if content:
                passages.append(Passage(len(passages), doc_title, content, {"document": doc_title}))
    return Document(source=source, title=doc_title, sha256=sha, passages=passages)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def read_folder(folder: Path) -> list[Document]:
    if not folder.is_dir():
        raise FileNotFoundError(f"knowledge base folder {folder} does not exist")
    docs = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix in KB_SUFFIXES and p.is_file()):
        docs.append(parse_document(path.read_text(encoding="utf-8"), str(path.relative_to(folder))))
    return docs
