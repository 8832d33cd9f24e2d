"""The line convention every rankmap text input shares: ``#`` starts a comment, blank
lines say nothing, and errors name the 1-based line number of the original text.

Readers that know how many lines they can use (a speeds file has one per task) iterate
:func:`iter_content_lines` and stop at the first line too many: the text is split a
piece at a time, so a file of 33 million short lines costs the lines read, not a
Python string per line of the whole file (``str.splitlines`` on 66 MB of ``1`` lines
takes about 2 GB).
"""

from __future__ import annotations

from collections.abc import Iterator

#: characters split at a time: about 32k short lines (a few MB of Python strings), and
#: few enough pieces that a large well-formed file is split at C speed
PIECE_CHARS = 1 << 16


def text_pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters, each cut just after
    a ``\\n`` (the last piece may end without one).  Concatenated they are ``text``, and
    no line (nor a ``\\r\\n`` pair) is cut in two, so splitting the pieces into lines
    gives the lines of the whole text."""
    pos, end = 0, len(text)
    while pos < end:
        cut = text.find("\n", min(pos + size, end) - 1)
        nxt = end if cut < 0 else cut + 1
        yield text[pos:nxt]
        pos = nxt


def iter_content_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, text without comment and surrounding blanks)`` of the lines that
    say something, in order, produced lazily (lines as :meth:`str.splitlines` cuts
    them)."""
    no = 0
    for piece in text_pieces(text):
        for line in piece.splitlines():
            no += 1
            body = line.split("#", 1)[0].strip()
            if body:
                yield no, body


def content_lines(text: str) -> list[tuple[int, str]]:
    """All of :func:`iter_content_lines` as a list (for inputs whose size is bounded
    otherwise)."""
    return list(iter_content_lines(text))
