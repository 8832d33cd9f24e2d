"""The documentation's links lead somewhere (issue 30): every relative link of README.md
and docs/*.md names a file that exists, and every ``#anchor`` a heading of its target,
spelt as GitHub makes anchors (lowercase, punctuation removed, spaces to ``-``, a
repeated heading numbered ``-1``, ``-2``).  The README stays a front page that reaches
every page of docs/, under 250 lines, and starts with its two commands.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose(text: str) -> str:
    """The text without fenced code blocks (headings and links in them are not ones)."""
    return _FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, lowercase, spaces to
    hyphens (letters, digits, ``_`` and ``-`` kept, non-ASCII letters too)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.lower().replace("`", "")
    text = "".join(c for c in text if c.isalnum() or c in " _-")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, heading in _HEADING.findall(prose(path.read_text(encoding="utf-8"))):
        base = anchor(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return _LINK.findall(_CODE.sub("", prose(path.read_text(encoding="utf-8"))))


def test_anchor_spelling_is_githubs():
    assert anchor("Does it pay?") == "does-it-pay"
    assert anchor("Presets: `fast`, `eco`, `strong`") == "presets-fast-eco-strong"
    assert anchor("Benchmark (`bench/bench_mapping.py`, run by hand)") == \
        "benchmark-benchbench_mappingpy-run-by-hand"
    assert anchor("Heterogeneous SUMMA (seed 004)") == "heterogeneous-summa-seed-004"
    assert anchor("rankmap — topology-aware") == "rankmap--topology-aware"


def test_the_link_parser_finds_links_and_skips_code():
    text = "a [x](docs/a.md#b) `[no](c.md)` ![img](p.png)\n```\n[no](d.md)\n```\n"
    assert _LINK.findall(_CODE.sub("", prose(text))) == ["docs/a.md#b", "p.png"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_exists(page):
    found = links(page)
    bad = []
    for target in found:
        if _EXTERNAL.match(target):
            continue
        file_part, _, fragment = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: no file {dest}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{fragment} in "
                       f"{dest.relative_to(ROOT)} (has {sorted(anchors(dest))})")
    assert not bad, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(bad)


def test_the_readme_reaches_every_page_of_docs():
    linked = {(README.parent / t.partition("#")[0]).resolve()
              for t in links(README) if not _EXTERNAL.match(t)}
    missing = [str(p.relative_to(ROOT)) for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"README.md links none of {missing} (add it to 'Documentation')"
    assert len(PAGES) >= 6, f"docs/ holds only {PAGES[1:]}"


def test_the_readme_is_a_front_page_starting_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    # the title, one paragraph, then the two commands: CI (.ci/run) runs exactly these
    m = re.match(r"# [^\n]+\n\n(?:(?!```|#)[^\n]+\n)+\n```bash\n([^`]*)```\n", text)
    assert m, "README.md must start with its title, a paragraph and the ```bash commands"
    commands = [line.split("#")[0].strip() for line in m.group(1).splitlines()]
    assert commands == ["bash deploy/quickstart.sh", ".venv/bin/python -m pytest -q"]
