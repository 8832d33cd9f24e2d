"""The line convention every rankmap text input shares: ``#`` starts a comment, blank
lines say nothing, and errors name the 1-based line number of the original text."""

from __future__ import annotations


def content_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, text without comment and surrounding blanks)`` of the lines that
    say something, in order."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if body:
            out.append((no, body))
    return out
