"""User-controlled text made safe for root's log and the job's report (standard library
only: the prolog and the TaskProlog import it).

Profile names, algorithm names, job names and the reasons quoting them can hold any
bytes (a user can load their own SPANK plugin and set ``SPANK_RANKMAP_COMM_PROFILE``
to anything).  :func:`safe_text` makes every control or formatting character visible
(``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\u2028`` ...), so one log record stays one line
and a terminal escape never reaches an administrator's terminal, and truncates.
"""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# control, format (bidi overrides, zero-width), line/paragraph separators, surrogates
# (undecodable bytes in the environment arrive as lone surrogates)
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape_char(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_controls(text: str) -> str:
    """``text`` with every control/format/separator character as a visible escape."""
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escape_char(c) if c != " " and
                   unicodedata.category(c) in _ESCAPED_CATEGORIES else c for c in text)


def escape_strings(value: object) -> object:
    """``value`` with every string in it escaped by :func:`escape_controls`, through
    dicts (keys too), lists and tuples; numbers, booleans and None as they are.

    For a report's whole record or template context at once, so that a field added
    later is escaped without anyone remembering to; not truncated (the prolog bounds
    what the worker sends, and the report's readers bound what they read).
    """
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, dict):
        return {escape_strings(k): escape_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_strings(v) for v in value]
    if isinstance(value, tuple):
        return tuple(escape_strings(v) for v in value)
    return value


def safe_text(value: object, limit: int | None = 200) -> str:
    """``value`` as one printable line of at most ``limit`` characters (plus a marker).

    ``None`` becomes ``-``.  Escaping happens before truncating, so whatever the cut the
    result holds no control character; the marker says how much was cut.
    """
    if value is None:
        return "-"
    text = escape_controls(value if isinstance(value, str) else str(value))
    if limit is not None and len(text) > limit:
        return f"{text[:limit]}...[{len(text) - limit} more]"
    return text
