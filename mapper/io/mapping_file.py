"""Mapping files: line r holds the PE (0-based) of rank r.

``rankmap map --output`` writes one (:func:`format_mapping`); ``rankmap evaluate
--mapping`` and ``rankmap evaluate-partition --placement`` read one
(:func:`read_mapping`), where ``#`` starts a comment and blank lines are skipped.
Whether the PEs form a mapping of the machine is checked by the caller
(:func:`mapper.objectives.qap.check_mapping`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import RankmapError
from .text_lines import content_lines


class MappingFileError(RankmapError, ValueError):
    """A mapping file that cannot be read; the message names the file (and line)."""


def format_mapping(mapping: np.ndarray) -> str:
    """The file's text: one PE per line, rank 0 first."""
    return "".join(f"{p}\n" for p in np.asarray(mapping).tolist())


def read_mapping(path: str | os.PathLike) -> np.ndarray:
    """Read a mapping file (one PE index per line); errors name the line."""
    try:
        lines = Path(path).read_text()
    except OSError as exc:
        raise MappingFileError(f"{path}: cannot read mapping: {exc.strerror}") from None
    values = []
    for no, text in content_lines(lines):
        try:
            values.append(int(text))
        except ValueError:
            raise MappingFileError(f"{path}:{no}: expected a PE index, got {text!r}"
                                   ) from None
    return np.asarray(values, dtype=np.int64)
