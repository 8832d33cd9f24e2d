"""The collective expansion: which messages each member of a collective sends.

One table, two users: the SMPI time-independent trace importer
(:mod:`slurm_plugin.profiles.smpi_ti`) and the recorder's merge
(:mod:`slurm_plugin.profiles.recording`) both turn a collective call into messages
through :func:`expand` and nothing else, so a program gives the same collective
traffic whether it was traced by SimGrid or recorded by librankmap_record.

The rules are the usual algorithms (MPICH's choices; Thakur, Rabenseifner and Gropp,
"Optimization of collective communication operations in MPICH", IJHPCA 2005), over
the ``n`` members of the communicator, ranks local to it:

=====================  =======  ======  ==============================================
operation              amount   root    messages member ``r`` sends
=====================  =======  ======  ==============================================
bcast                  message  yes     binomial tree from the root: ``v = r - root
                                        mod n`` sends to ``v + 2^k`` for every ``2^k``
                                        below ``v``'s lowest set bit (the root: below
                                        ``n``)
reduce                 message  yes     the mirrored tree: ``v`` sends to
                                        ``v - lowbit(v)``; the root sends nothing
allreduce              message  no      recursive doubling among the largest power of
                                        two ``p <= n``: ``r xor 2^k``; ``p + i`` folds
                                        into ``i`` and ``i`` sends the result back
scan, exscan           message  no      recursive doubling: ``r xor 2^k`` below ``n``
alltoall               block    no      pairwise exchange: the block to every other
                                        member
alltoallv              per      no      pairwise exchange: ``amount[j]`` to every
                       member           other member ``j`` (its send counts)
allgather              block    no      a ring: ``n - 1`` blocks to ``r + 1``
allgatherv             per      no      a ring: every block but ``r + 1``'s to
                       member           ``r + 1`` (amount: every member's block)
gather, gatherv        block    yes     linear: the block to the root (gatherv: the
                                        member's own block); the root sends nothing
scatter                block    yes     linear: the root sends the block to every
                                        other member
scatterv               per      yes     linear: the root sends ``amount[j]`` to ``j``
                       member
reduce_scatter         per      no      pairwise exchange: ``amount[j]`` to every
                       member           other ``j`` (its block of the result)
reduce_scatter_block   block    no      pairwise exchange: the block to every other
barrier                -        no      dissemination, 0-byte messages: no volume
=====================  =======  ======  ==============================================

Amounts are bytes; a "per member" amount may be given as one number for all members.
Every rule is linear in its amount (the pattern does not depend on the size), so calls
with the same pattern can be summed before expanding: the recorder writes one line
per (operation, communicator, root, bytes) with a call count, and one summed row per
v-collective.  The nonblocking forms (``ibcast``, ...) and SimGrid's spellings
(``reducescatter``) are aliases (:func:`canonical`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mapper.errors import RankmapError


class CollectiveError(RankmapError, ValueError):
    """A collective that cannot be expanded (unknown name, rank out of range, ...)."""


Sends = tuple[np.ndarray, np.ndarray]  # destination member ranks, bytes


@dataclass(frozen=True)
class Rule:
    """How one collective operation expands.

    ``per_member``: the amount is one number of bytes per member (a v-collective);
    ``rooted``: the call names a root; ``sends(rank, n, root, amount)`` the messages.
    """

    name: str
    per_member: bool
    rooted: bool
    sends: Callable[[int, int, int, np.ndarray], Sends]


def _empty() -> Sends:
    return np.zeros(0, dtype=np.int64), np.zeros(0)


def _to(dst, nbytes) -> Sends:
    d = np.atleast_1d(np.asarray(dst, dtype=np.int64))
    return d, np.broadcast_to(np.asarray(nbytes, dtype=float), d.shape).astype(float)


def _others(rank: int, n: int) -> np.ndarray:
    return np.delete(np.arange(n, dtype=np.int64), rank)


def binomial_children(v: int, n: int) -> np.ndarray:
    """Relative ranks v sends to in a binomial broadcast tree over n ranks."""
    low = v & -v if v else 1 << max(n - 1, 0).bit_length()
    masks = 1 << np.arange(max(low.bit_length() - 1, 0), dtype=np.int64)
    kids = v + masks
    return kids[kids < n]


def recursive_doubling_partners(r: int, n: int) -> np.ndarray:
    """Ranks r sends to in a recursive-doubling allreduce (fold-in beyond 2^k ≤ n)."""
    p = 1 << (n.bit_length() - 1)
    if r >= p:
        return np.array([r - p], dtype=np.int64)
    partners = r ^ (1 << np.arange(p.bit_length() - 1, dtype=np.int64))
    if r < n - p:
        partners = np.append(partners, r + p)
    return partners


def _bcast(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _to((binomial_children((r - root) % n, n) + root) % n, a)


def _reduce(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    v = (r - root) % n
    return _empty() if v == 0 else _to((v - (v & -v) + root) % n, a)


def _allreduce(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _to(recursive_doubling_partners(r, n), a)


def _scan(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    partners = r ^ (1 << np.arange(max(n - 1, 1).bit_length(), dtype=np.int64))
    return _to(partners[partners < n], a)


def _pairwise(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    others = _others(r, n)
    return _to(others, a[others] if a.ndim else a)


def _allgather(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _empty() if n == 1 else _to((r + 1) % n, (n - 1) * a)


def _allgatherv(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    if n == 1:
        return _empty()
    c = np.broadcast_to(a, (n,))
    return _to((r + 1) % n, c.sum() - c[(r + 1) % n])


def _gather(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _empty() if r == root else _to(root, a)


def _scatter(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _pairwise(r, n, root, a) if r == root else _empty()


def _barrier(r: int, n: int, root: int, a: np.ndarray) -> Sends:
    return _empty()


#: the expansion of every collective, by its canonical name
RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("bcast", False, True, _bcast),
    Rule("reduce", False, True, _reduce),
    Rule("allreduce", False, False, _allreduce),
    Rule("scan", False, False, _scan),
    Rule("exscan", False, False, _scan),
    Rule("alltoall", False, False, _pairwise),
    Rule("alltoallv", True, False, _pairwise),
    Rule("allgather", False, False, _allgather),
    Rule("allgatherv", True, False, _allgatherv),
    Rule("gather", False, True, _gather),
    Rule("gatherv", False, True, _gather),
    Rule("scatter", False, True, _scatter),
    Rule("scatterv", True, True, _scatter),
    Rule("reduce_scatter", True, False, _pairwise),
    Rule("reduce_scatter_block", False, False, _pairwise),
    Rule("barrier", False, False, _barrier),
)}

_ALIASES = {"reducescatter": "reduce_scatter"}


def canonical(name: str) -> str | None:
    """The table's name for NAME (any case, a nonblocking ``i`` form, SimGrid's
    spelling), or None when it is no collective of the table."""
    low = _ALIASES.get(name.lower(), name.lower())
    if low in RULES:
        return low
    if low.startswith("i"):
        low = _ALIASES.get(low[1:], low[1:])
        if low in RULES:
            return low
    return None


def expand(op: str, rank: int, n: int, root: int | None, amount) -> Sends:
    """The messages member ``rank`` of ``n`` sends in collective ``op``: arrays of
    destination member ranks and of bytes.  ``amount`` is bytes (one per member for a
    per-member rule, or one number for all); ``root`` is needed by rooted rules."""
    name = canonical(op)
    if name is None:
        raise CollectiveError(f"unknown collective {op!r}")
    rule = RULES[name]
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise CollectiveError(f"{name}: {n!r} members")
    if not 0 <= rank < n:
        raise CollectiveError(f"{name}: rank {rank} is not a member of {n}")
    if rule.rooted:
        if root is None or not 0 <= root < n:
            raise CollectiveError(f"{name}: root {root} is not a member of {n}")
    else:
        root = 0
    a = np.asarray(amount, dtype=float)
    if a.ndim > (1 if rule.per_member else 0):
        want = "one number or one per member" if rule.per_member else "one number"
        raise CollectiveError(f"{name}: the amount must be {want}")
    if a.ndim == 1 and len(a) != n:
        raise CollectiveError(f"{name}: {len(a)} amounts for {n} members")
    if (a < 0).any() or not np.isfinite(a).all():
        raise CollectiveError(f"{name}: amounts must be finite and not negative")
    return rule.sends(int(rank), int(n), int(root), a)
