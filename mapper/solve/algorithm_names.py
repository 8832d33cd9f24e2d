"""Algorithm names: the one grammar the solver, the site config and the SPANK plugin share.

Standard library only, and importable without loading the solver (``mapper/__init__``
imports lazily), so the TaskProlog can validate a configuration cheaply.  The SPANK
plugin (C) keeps its own copy of :data:`ALGORITHMS`; a test compares the two.

Grammar, case-insensitive, normalised to lower case::

    PRESET | CONSTRUCTION[+NEIGHBOURHOOD]
    PRESET        = fast | eco | strong     (mapper.solve.presets: what each runs)
    CONSTRUCTION  = identity | random | greedy | greedyallc | topdown | bottomup | ohtma
                  | matching
    NEIGHBOURHOOD = n<d> (d >= 1) | nc<d> (d >= 1) | np | np<block> (block >= 2) | n2
"""

from __future__ import annotations

import re

ALGORITHMS = ("identity", "random", "greedy", "greedyallc", "topdown", "bottomup", "ohtma",
              "matching")
NEIGHBORHOODS = ("n<d>", "nc<d>", "np", "np<block>", "n2")
#: Named recipes that fill a time budget (:mod:`mapper.solve.presets`); valid wherever an
#: algorithm name is.
PRESETS = ("fast", "eco", "strong")
#: constructions that need a switch tree (a :class:`mapper.model.machine.Hierarchy`)
TREE_CONSTRUCTIONS = ("topdown", "bottomup", "matching")
#: what runs in a tree-only construction's place on a machine without a switch tree (a
#: hop matrix), keeping the neighbourhood asked for; with N_C^10 it is the presets' and
#: the site's default there
NETWORK_CONSTRUCTION = "ohtma"
NETWORK_DEFAULT = f"{NETWORK_CONSTRUCTION}+n10"

_NEIGHBORHOOD = re.compile(r"^(?:(?P<n2>n2)|nc?(?P<d>\d+)|np(?P<block>\d*))$")


def algorithm_error(name: str) -> str:
    """The message for a name that is not in the grammar."""
    return (f"unknown algorithm {name!r}: expected a preset ({', '.join(PRESETS)}) or "
            f"CONSTRUCTION[+NEIGHBOURHOOD] with "
            f"CONSTRUCTION one of {', '.join(ALGORITHMS)} and NEIGHBOURHOOD one of "
            f"{', '.join(NEIGHBORHOODS)} (e.g. topdown+n10)")


def is_preset(name: str) -> bool:
    """True for a preset name (any case)."""
    return name.strip().lower() in PRESETS


def parse_algorithm(name: str) -> tuple[str, str | None, int | None]:
    """``(construction, neighbourhood, parameter)``: neighbourhood ``"nc"`` (parameter d),
    ``"np"`` (block, None for the default), ``"n2"`` or None.  ValueError naming what
    is wrong for anything outside the grammar."""
    parts = name.strip().lower().split("+")
    if len(parts) > 2 or parts[0] not in ALGORITHMS:
        raise ValueError(algorithm_error(name))
    if len(parts) == 1:
        return parts[0], None, None
    m = _NEIGHBORHOOD.match(parts[1])
    if not m:
        raise ValueError(f"unknown neighbourhood {parts[1]!r} in {name!r}: expected one of "
                         f"{', '.join(NEIGHBORHOODS)}")
    if m.group("n2"):
        return parts[0], "n2", None
    if m.group("d") is not None:
        if int(m.group("d")) < 1:
            raise ValueError(f"{name!r}: communication distance must be at least 1")
        return parts[0], "nc", int(m.group("d"))
    if m.group("block") and int(m.group("block")) < 2:
        raise ValueError(f"{name!r}: pruned block size must be at least 2")
    return parts[0], "np", int(m.group("block")) if m.group("block") else None


def for_network(name: str) -> str:
    """``name`` for a machine without a switch tree: a tree-only construction becomes
    :data:`NETWORK_CONSTRUCTION` with the same neighbourhood (``topdown+n10`` →
    ``ohtma+n10``); presets (which choose their own) and the other constructions are
    kept.  ValueError outside the grammar."""
    if is_preset(name) or parse_algorithm(name)[0] not in TREE_CONSTRUCTIONS:
        return name
    rest = name.strip().lower().split("+", 1)[1:]
    return "+".join([NETWORK_CONSTRUCTION, *rest])


def normalize_algorithm(name: str) -> str:
    """``TopDown+N10`` → ``topdown+n10``, ``Strong`` → ``strong``; ValueError for anything
    outside the grammar."""
    if not is_preset(name):
        parse_algorithm(name)
    return name.strip().lower()
