"""One exception base for everything rankmap reports to users.

:class:`RankmapError` means "the input is wrong", never "the program is wrong": the
CLI prints it as one line and exits 2, the prolog's worker turns it into a fallback
report.  Any other exception is a bug and keeps its traceback.  Like ClusterShell's
exceptions it carries where the bad text was (``source``: a file or field, ``line``
when known).  Subclasses also derive from the built-in type callers used to catch
(``ValueError``, ``OSError``, ``RuntimeError``), so older ``except`` clauses still
work.
"""

from __future__ import annotations


class RankmapError(Exception):
    """Bad input or an unusable environment, with the message users see."""

    def __init__(self, message: str = "", *, source: str | None = None,
                 line: int | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.line = line
