"""The docs a user reads quote measured figures from docs/BENCHMARKS.md only (issue #32).

A *quoted figure* is a number with a unit of measure (ms, s, %, MiB, GiB, MB, GB, tokens/s) in a block — a
paragraph, a list item or a table row — that cites the reference (a link to BENCHMARKS.md). Every such number
must appear in BENCHMARKS.md. A block with a figure never cites the journal (a "§N" or docs/lab/JOURNAL.md):
the journal is how a figure was found, the reference is what it is today.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "BENCHMARKS.md"
#: the docs a user reads; each quotes figures only from the reference
USER_DOCS = ["README.md", "docs/DEPLOY.md", "docs/USAGE.md", "docs/CONFIGURATION.md", "docs/ARCHITECTURE.md",
             "docs/PROTOCOL.md", "docs/LATENCY.md", "docs/OBSERVABILITY.md", "web/README.md"]

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
#: a number, or a range of two ("542–544 ms", "0.36-0.52 s", "1211 → 1185 MiB"), and its unit
_FIGURE = re.compile(rf"(?<![\w.])({_NUMBER})(?:\s*(?:–|-|→|to)\s*({_NUMBER}))?\s*"
                     r"(ms|s|%|MiB|GiB|MB|GB|tokens/s|tok/s)(?![\w/])")
_CITES_REFERENCE = re.compile(r"\]\((?:\.\./)?(?:docs/)?BENCHMARKS\.md(?:#[^)]*)?\)")
_CITES_JOURNAL = re.compile(r"§\s?\d|lab/JOURNAL\.md")


def blocks(markdown: str) -> list[str]:
    """A Markdown text as its blocks: paragraphs (blank-line separated), list items and table rows, code fences
    left out (a command's output or a config file is not a quoted figure)."""
    out: list[str] = []
    current: list[str] = []
    fenced = False

    def flush() -> None:
        if current:
            out.append(" ".join(current))
            current.clear()

    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if not stripped or stripped.startswith("#"):
            flush()
        elif stripped.startswith("|") or re.match(r"[-*] |\d+\. ", stripped):
            flush()
            current.append(stripped)
            if stripped.startswith("|"):
                flush()
        else:
            current.append(stripped)
    flush()
    return out


def figures(block: str) -> list[str]:
    """The numbers of the quoted figures of one block, each as written (without thousands separators)."""
    found = []
    for match in _FIGURE.finditer(block):
        found.extend(n.replace(",", "") for n in match.group(1, 2) if n)
    return found


def reference_numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in re.findall(rf"(?<![\w.]){_NUMBER}", text)}


def problems(doc: str, name: str, reference: set[str]) -> list[str]:
    found = []
    for block in blocks(doc):
        if _CITES_JOURNAL.search(block) and figures(block):
            found.append(f"{name}: cites the journal for a figure, not the reference: {block[:120]!r}")
        if _CITES_REFERENCE.search(block):
            missing = [n for n in figures(block) if n not in reference]
            if missing:
                found.append(f"{name}: quotes {missing} not in docs/BENCHMARKS.md: {block[:120]!r}")
    return found


def test_the_checker_finds_a_figure_the_reference_lacks():
    reference = reference_numbers("| N=1 voice_to_voice p50 | 522 (543) ms |\n| right | 90.2 % |")
    doc = ("Measured: 522 ms and 90.2 % ([BENCHMARKS.md](BENCHMARKS.md)).\n\n"
           "Then 523 ms ([BENCHMARKS.md](docs/BENCHMARKS.md#latency)).\n\n"
           "A setting of 700 ms, not a quoted figure.\n\n"
           "From the journal, §40: 75.0 %.\n\n"
           "How it was found: [the journal](lab/JOURNAL.md).\n\n"
           "```\nFLEET 618 ms ([BENCHMARKS.md](BENCHMARKS.md))\n```\n")
    found = problems(doc, "doc", reference)
    assert len(found) == 2, found
    assert "['523']" in found[0]
    assert "cites the journal" in found[1]


def test_a_range_and_thousands_are_read_as_numbers():
    assert figures("p50 542–544 ms, RSS 1,211 → 1185 MiB, 0.36-0.52 s, 28 tokens/s, 3 of 4") == \
        ["542", "544", "1211", "1185", "0.36", "0.52", "28"]


@pytest.mark.parametrize("name", USER_DOCS)
def test_user_docs_quote_only_the_reference(name):
    reference = reference_numbers(REFERENCE.read_text())
    assert problems((ROOT / name).read_text(), name, reference) == []


def test_the_reference_stays_a_reference():
    text = REFERENCE.read_text()
    assert len(text.splitlines()) <= 400
    assert "## Latency" in text and "| figure" in text
