"""Algorithm names: the one grammar the solver, the site config and the SPANK plugin share.

Standard library only, and importable without loading the solver (``mapper/__init__``
imports lazily), so the TaskProlog can validate a configuration cheaply.  The SPANK
plugin (C) keeps its own copy of :data:`CONSTRUCTIONS`; a test compares the two.

Grammar, case-insensitive, normalised to lower case::

    CONSTRUCTION[+NEIGHBOURHOOD]
    CONSTRUCTION  = identity | random | greedy | greedyallc | topdown | bottomup
    NEIGHBOURHOOD = n<d> (d >= 1) | nc<d> (d >= 1) | np | np<block> (block >= 2) | n2
"""

from __future__ import annotations

import re

CONSTRUCTIONS = ("identity", "random", "greedy", "greedyallc", "topdown", "bottomup")
NEIGHBORHOODS = ("n<d>", "nc<d>", "np", "np<block>", "n2")

ALGORITHM = re.compile(r"^(?P<construction>[a-z]+)"
                       r"(?:\+(?P<nbh>n2|n(?P<d>[1-9]\d*)|nc(?P<dc>[1-9]\d*)"
                       r"|np(?P<block>[2-9]|[1-9]\d+)?))?$")


def algorithm_error(name: str) -> str:
    """The message for a name that is not in the grammar."""
    return (f"unknown algorithm {name!r}: expected CONSTRUCTION[+NEIGHBOURHOOD] with "
            f"CONSTRUCTION one of {', '.join(CONSTRUCTIONS)} and NEIGHBOURHOOD one of "
            f"{', '.join(NEIGHBORHOODS)} (e.g. topdown+n10)")


def normalize_algorithm(name: str) -> str:
    """``TopDown+N10`` → ``topdown+n10``; ValueError (with :func:`algorithm_error`'s
    message) for anything outside the grammar."""
    text = name.strip().lower()
    m = ALGORITHM.match(text)
    if not m or m.group("construction") not in CONSTRUCTIONS:
        raise ValueError(algorithm_error(name))
    return text
