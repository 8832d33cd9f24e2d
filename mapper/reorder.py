"""Rank reordering: the mapping applied by renumbering ranks instead of moving them.

When the launcher places the processes itself (``srun``, or ``mpirun`` without a
rankfile), rank r starts on ``launcher[r]``, not on ``mapping[r]``.  The mapping is
still honoured if the application swaps its communicator for one in which the process
on PE ``mapping[k]`` has rank k (the seed's rank reordering method, §III.C; there
with ``MPI_Dist_graph_create``, here with ``MPI_Comm_split`` whose key is the new
rank: :file:`deploy/librankmap`).

Definition: ``reorder[r]`` is the new rank of the process the launcher started as
rank r, i.e. the k with ``mapping[k] == launcher[r]``.  Both arrays are bijections
onto the same set of PEs, so ``reorder = mapping⁻¹ ∘ launcher`` is a permutation of
0..n-1, and the new rank k runs on ``launcher[reorder⁻¹[k]] == mapping[k]``.

Files (text in, text out; the caller writes them):

* the reorder file: line r holds ``reorder[r]`` (n lines);
* the seed's Dist_graph file (§IV.C): n on the first line, then for every process
  one line "degree neighbour neighbour …" (neighbours ascending).

All functions are O(n) or O(n + m) array operations.

References
----------
* C. Sudhakar, P. Adhikari, T. Ramesh: Process Assignment in Multi-core Clusters
  Using Job Assignment Algorithm, ICACC 2015 (§III.C, §IV.C, Fig. 6).
"""

from __future__ import annotations

import numpy as np

from .errors import RankmapError
from .graph import CommGraph
from .text_lines import iter_content_lines


class ReorderError(RankmapError, ValueError):
    """A mapping and a launcher placement that do not cover the same PEs, or a reorder
    file that is not a permutation; messages name the file:line when there is one."""


def rank_reorder(mapping: np.ndarray, launcher: np.ndarray) -> np.ndarray:
    """``reorder[r]``: new rank of the process the launcher started as rank r."""
    mapping = np.asarray(mapping, dtype=np.int64)
    launcher = np.asarray(launcher, dtype=np.int64)
    n = len(mapping)
    if len(launcher) != n:
        raise ReorderError(f"the mapping has {n} ranks, the launcher's placement "
                           f"{len(launcher)}")
    for name, arr in (("mapping", mapping), ("launcher placement", launcher)):
        if len(np.unique(arr)) != n:
            raise ReorderError(f"the {name} puts two ranks on one PE")
    order = np.argsort(mapping)
    pes = mapping[order]
    pos = np.searchsorted(pes, launcher)
    pos = np.minimum(pos, n - 1)
    if n and np.any(pes[pos] != launcher):
        r = int(np.flatnonzero(pes[pos] != launcher)[0])
        raise ReorderError(f"the launcher starts rank {r} on PE {int(launcher[r])}, "
                           f"which the mapping does not use")
    return order[pos].astype(np.int64)


def format_reorder(reorder: np.ndarray) -> str:
    """The reorder file: line r holds the new rank of launcher rank r."""
    return "".join(f"{k}\n" for k in np.asarray(reorder, dtype=np.int64).tolist())


def parse_reorder(text: str, n: int | None = None, source: str = "<reorder>") -> np.ndarray:
    """Read a reorder file back and check that it is a permutation (of size ``n``);
    errors name ``source:line``.  A line beyond ``n`` ranks is refused as soon as it is
    read, before the rest of the file is split into lines."""
    values: list[int] = []
    line_of: list[int] = []
    for no, word in iter_content_lines(text):
        if n is not None and len(values) == n:
            raise ReorderError(f"{source}:{no}: more than {n} ranks, the job has {n}",
                               source=source, line=no)
        try:
            values.append(int(word))
        except ValueError:
            raise ReorderError(f"{source}:{no}: expected a rank, got {word!r}",
                               source=source, line=no) from None
        line_of.append(no)
    arr = np.asarray(values, dtype=np.int64)
    if n is not None and len(arr) != n:
        raise ReorderError(f"{source}: {len(arr)} ranks, the job has {n}", source=source)
    bad = np.flatnonzero((arr < 0) | (arr >= len(arr)))
    if len(bad):
        no = line_of[bad[0]]
        raise ReorderError(f"{source}:{no}: rank {int(arr[bad[0]])} out of range "
                           f"0..{len(arr) - 1}", source=source, line=no)
    uniq, first = np.unique(arr, return_index=True)
    if len(uniq) != len(arr):
        is_first = np.zeros(len(arr), dtype=bool)
        is_first[first] = True
        i = int(np.flatnonzero(~is_first)[0])
        no = line_of[i]
        earlier = line_of[int(first[np.searchsorted(uniq, arr[i])])]
        raise ReorderError(f"{source}:{no}: rank {int(arr[i])} again (first on line "
                           f"{earlier})", source=source, line=no)
    return arr


def dist_graph_text(n: int, src: np.ndarray, dst: np.ndarray) -> str:
    """The seed's Dist_graph file for undirected edges ``(src[i], dst[i])``: each edge is
    listed on both endpoints' lines; repeated edges once; neighbours ascending."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    a = np.concatenate([src[keep], dst[keep]])
    b = np.concatenate([dst[keep], src[keep]])
    if len(a) and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
        raise ReorderError(f"an edge names a process outside 0..{n - 1}")
    pairs = np.unique(np.column_stack([a, b]), axis=0) if len(a) else np.zeros((0, 2), int)
    starts = np.searchsorted(pairs[:, 0], np.arange(n + 1))
    lines = [str(n)]
    for p in range(n):  # one line per process: the output itself is O(n + m)
        nbrs = pairs[starts[p]:starts[p + 1], 1].tolist()
        lines.append(" ".join(map(str, [len(nbrs), *nbrs])))
    return "\n".join(lines) + "\n"


def comm_graph_dist_graph_text(graph: CommGraph) -> str:
    """Dist_graph file of a communication graph: every rank's communication partners
    (in the graph's numbering, i.e. the new ranks when the graph is the job's profile)."""
    u, v, _ = graph.edges()
    return dist_graph_text(graph.n, u, v)
