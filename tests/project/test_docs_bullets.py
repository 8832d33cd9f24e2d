"""Docs a user can scan (issue 52 item 5): no list item in the README, docs/ or bench/'s
READMEs runs over 120 words; a longer explanation is paragraphs under its heading."""

import re

from tests.helpers.paths import REPO

LIMIT = 120
ITEM = re.compile(r"^(\s*)([*-]|\d+\.) ")


def long_items(text: str) -> list[tuple[int, int]]:
    """(line, words) of every list item over LIMIT words, continuation lines included;
    fenced code is not prose."""
    lines, out, i, fenced = text.split("\n"), [], 0, False
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        m = None if fenced else ITEM.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, j = len(m.group(1)), i + 1
        while (j < len(lines) and lines[j].strip() and not ITEM.match(lines[j])
               and len(lines[j]) - len(lines[j].lstrip()) > indent):
            j += 1
        words = len(" ".join(lines[i:j]).split())
        if words > LIMIT:
            out.append((i + 1, words))
        i = j
    return out


def test_no_docs_bullet_runs_over_120_words():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "bench").rglob("README.md"))]
    found = {str(p.relative_to(REPO)): long_items(p.read_text()) for p in pages}
    assert not {k: v for k, v in found.items() if v}, found


def test_the_check_sees_a_long_bullet():
    assert long_items("- " + "word " * 121 + "\n") == [(1, 122)]
    assert long_items("- short\n  continued\n- " + "w " * 50) == []
