"""Domain decomposition of a mesh onto a machine: partition, quotient graph, mapping.

The one pipeline the ``rankmap partition`` command, the prolog's mesh jobs and the
benchmarks share.  It is the "process mapping methodology" of Schulz, Träff & von
Kirchbach §4 ("Model Creation"): "a graph partitioning algorithm is used to partition a
large network into n blocks ... Afterwards, a coarser model of computation and
communication is created [the quotient graph] ... This model is then mapped to a
processor network of n PEs", with the partitioners of both seeds:

1. **partition** the mesh into one block per PE, block targets proportional to the PE
   speeds (``arch.speeds``):

   * ``rb`` — recursive bisection, block ids in bisection order
     (:func:`mapper.mesh.rb.rb_partition`; O(m log P) backend work in practice);
   * ``rms`` — recursive multisection along the hierarchy, block id = PE id
     (:func:`mapper.mesh.rms.rms_partition`; O(m · levels));
   * ``archaware-{vol,elt}-{sparse,dense}`` — Moulitsas & Karypis' predictor-corrector
     VolS/VolNS/ElTS/ElTNS (:func:`mapper.mesh.archaware.archaware_partition`; METIS
     k-way plus O(passes · Σ deg · s) refinement; the dense ones O(P²) memory).  They
     already place block p on PE p with the architecture's costs in the objective, so
     their blocks are not remapped.

2. **quotient** graph: one vertex per block, edge {i, j} weighted by the c-volume the two
   blocks exchange (:func:`mapper.mesh.metrics.quotient_graph`; O(m + b log b) for b cut
   arcs).

3. **map** the quotient graph onto ``hierarchy`` with ``map_algorithm``
   (:func:`mapper.solve.api.map_processes`, default Top-Down + N_C^10, the best of §5.2's
   Fig. 4; the algorithm's own complexity, bounded by ``time_limit``).  With
   ``keep_identity`` (default) the identity is the baseline the mapping must beat
   strictly (and is polished by local search as a candidate), so rankmap's
   TopDown-on-RMS never loses to Identity-on-RMS.  The mapping runs only when all PE
   speeds are equal: block b's target is PE b's speed share, and moving it to a PE of
   another speed would break that target, so with unequal speeds the identity is kept
   and a note says why.  ``map_algorithm="identity"`` skips the phase (§4: "the
   identity mapping ... is also a possible option").

4. **evaluate** the PE-level partition ``placement[part]`` on the architecture
   (:func:`mapper.mesh.metrics.evaluate_partition`, Moulitsas & Karypis §2-3: edge cut, volume,
   CompCost/CommCost/ElapseTime, imbalance against the speed targets, and J of the
   quotient graph on the hierarchy; O(m + b log b)).

``time_limit`` (seconds, from the call) is shared: the archaware corrector starts no pass
that would not end within it, and the mapping gets what the partition left (none left:
identity, with a note).  When METIS k-way into P parts, the archaware predictor, is
estimated above half the budget (:func:`kvmetis_estimate`), the speed-targeted RMS
partition is the predictor instead (not the paper's choice; a note says so): on a
10^6-vertex grid onto 4096 PEs METIS k-way took 6.4-7.9 s here, RMS 3.5 s, and RMS's
MaxElTime (31 149 with half the PEs twice as fast) is about kvmetis' (29 931); the
corrector then lowers it as far as the time left allows (13 420 within 9 s).  Neither
METIS nor the Top-Down construction is interruptible, so it is a goal,
not a hard bound (the prolog enforces that from outside).

References
----------
* C. Schulz, J. L. Träff, K. von Kirchbach: Better Process Mapping and Sparse Quadratic
  Assignment.  arXiv:1702.04164v2 (the § numbers used here), §4 (RB and RMS model
  creation) and §5.2 (Fig. 4); ACM J. Exp. Algorithmics 25 (2020), doi:10.1145/3409667.
* I. Moulitsas, G. Karypis: Architecture Aware Partitioning Algorithms.  ICA3PP 2008,
  LNCS 5022, pp. 42-53, doi:10.1007/978-3-540-69501-1_6, §2-4.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..model.machine import Hierarchy
from ..partitioners.errors import PartitionError
from ..solve.algorithm_names import is_preset
from ..solve.api import map_processes
from ..solve.runner import AlgorithmSpec
from . import method_names
from .archaware import archaware_partition
from .method_names import DEFAULT_BACKEND
from .metrics import PartitionMetrics, evaluate_partition, quotient_graph
from .rb import rb_partition
from .result import Partition
from .rms import rms_partition

#: "no mapping": the blocks keep their ids as PEs
IDENTITY = "identity"

_ARCHAWARE = {method_names.ARCHAWARE_VOL_SPARSE: ("vol", True),
              method_names.ARCHAWARE_VOL_DENSE: ("vol", False),
              method_names.ARCHAWARE_ELT_SPARSE: ("elt", True),
              method_names.ARCHAWARE_ELT_DENSE: ("elt", False)}


@dataclass(frozen=True)
class Decomposition:
    """A mesh decomposed onto a machine.

    Attributes
    ----------
    part:
        Rank owning every mesh vertex (0..P-1): the partition file's content.
    placement:
        PE of every rank (length P, a permutation): the ``rankmap map`` format, the
        rankfile's mapping.  The PE-level partition is ``placement[part]``.
    method:
        Partitioning method (:mod:`mapper.mesh.method_names`).
    map_algorithm:
        What mapped the quotient graph: the algorithm name, ``"identity"`` (no mapping),
        or ``"identity+<neighbourhood>"`` when the identity polished by local search
        beat the algorithm.
    metrics:
        Of ``placement[part]`` on the architecture, J on the hierarchy included.
    seconds:
        Wall time per phase: ``partition``, ``quotient``, ``map``, ``evaluate``, ``total``.
    notes:
        Why a phase was skipped or what won, for users.
    partition_seconds:
        The partitioner's own phases (:attr:`mapper.mesh.result.Partition.seconds`).
    """

    part: np.ndarray
    placement: np.ndarray
    method: str
    map_algorithm: str
    metrics: PartitionMetrics
    seconds: dict[str, float]
    notes: tuple[str, ...] = ()
    partition_seconds: dict[str, float] = field(default_factory=dict)


def decompose(mesh, hierarchy: Hierarchy, arch, *, method: str = method_names.RMS,
              epsilon: float = 0.03, map_algorithm: str = "topdown+n10", seed: int = 0,
              time_limit: float | None = None, backend: str = DEFAULT_BACKEND,
              keep_identity: bool = True) -> Decomposition:
    """Partition ``mesh`` onto the PEs of ``hierarchy``/``arch`` and map the blocks.

    ``arch`` (:class:`mapper.mesh.architecture.Architecture`) must have one PE per PE of
    ``hierarchy`` (same numbering); its speeds set the block targets, its link costs the
    cost model.  ``method`` is one of :data:`mapper.mesh.method_names.PARTITION_METHODS`;
    ``backend`` (``metis``/``kahip``) is used by ``rb`` and ``rms``.  The phases, their
    complexity and the rules are in the module docstring.  Raises
    :class:`mapper.partitioners.errors.PartitionError` (a ``RankmapError``) for an unknown
    method, a machine/architecture mismatch or a mesh with fewer vertices than PEs, and
    ``AlgorithmError`` for an unknown ``map_algorithm``.
    """
    start = time.perf_counter()
    P = hierarchy.n  # noqa: N806 - the papers' name
    if method not in method_names.PARTITION_METHODS:
        raise PartitionError(f"unknown partitioning method {method!r}: expected one of "
                             f"{', '.join(method_names.PARTITION_METHODS)}")
    if int(arch.P) != P:
        raise PartitionError(f"the architecture has {arch.P} PEs but the hierarchy has {P}")
    if time_limit is not None and not time_limit > 0:
        raise PartitionError(f"time_limit must be a positive number of seconds, got "
                             f"{time_limit!r}")
    map_algorithm = map_algorithm.strip().lower()
    if not is_preset(map_algorithm):
        AlgorithmSpec.parse(map_algorithm)  # an unknown name fails before the partition
    speeds = np.asarray(arch.speeds, dtype=np.float64)
    notes: list[str] = []
    seconds: dict[str, float] = {}

    t0 = time.perf_counter()
    partition = _partition(mesh, hierarchy, arch, method, epsilon, seed, time_limit, backend,
                           notes)
    seconds["partition"] = time.perf_counter() - t0
    part = partition.part

    placement = np.arange(P, dtype=np.int64)
    used = IDENTITY
    seconds["quotient"] = seconds["map"] = 0.0
    left = None if time_limit is None else time_limit - (time.perf_counter() - start)
    if map_algorithm == IDENTITY:
        pass
    elif method in _ARCHAWARE:
        notes.append(f"{method} places block p on PE p (the architecture is in its "
                     f"objective): {map_algorithm} not run")
    elif np.any(speeds != speeds[0]):
        notes.append(f"PE speeds differ: block targets follow the PEs' speeds, so the "
                     f"blocks keep their PEs (identity); {map_algorithm} not run")
    elif left is not None and left <= 0:
        notes.append(f"time limit {time_limit:g} s used up by the partition: identity "
                     f"kept; {map_algorithm} not run")
    else:
        t0 = time.perf_counter()
        quotient = quotient_graph(mesh, part, P)
        seconds["quotient"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if left is not None:
            left -= seconds["quotient"]
        result = map_processes(quotient, hierarchy, map_algorithm, seed,
                               None if left is None else max(left, 1e-3),
                               baseline=placement if keep_identity else None)
        seconds["map"] = time.perf_counter() - t0
        placement = np.asarray(result.mapping, dtype=np.int64)
        used = map_algorithm
        if result.origin != "algorithm":
            used = result.origin.replace("baseline", IDENTITY)
            cand = ", ".join(f"{k.replace('baseline', IDENTITY)} {v:g}"
                             for k, v in result.candidates.items())
            notes.append(f"{map_algorithm} did not beat the identity; kept {used} "
                         f"(J: {cand})")
        if result.hit_time_limit:
            notes.append(f"{map_algorithm} stopped at the time limit")

    t0 = time.perf_counter()
    metrics = evaluate_partition(mesh, placement[part], arch, hierarchy=hierarchy)
    seconds["evaluate"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start
    return Decomposition(part=part, placement=placement, method=method, map_algorithm=used,
                         metrics=metrics, seconds=seconds, notes=tuple(notes),
                         partition_seconds=dict(partition.seconds))


#: Seconds per (vertex + arc) and level of METIS k-way into P parts (log2 P levels), an
#: upper value of what was measured here (2.5e-8 on a 2^17-vertex rgg into 512 parts,
#: 9.5e-8 on the 100^3 grid into 4096, 1.3e-7 on the 50^3 grid into 1024): decides
#: whether the archaware predictor fits a time limit.
KVMETIS_SECONDS_PER_ITEM_LEVEL = 1.3e-7

#: Share of the time limit the archaware predictor may take before RMS replaces it.
PREDICTOR_SHARE = 0.5


def kvmetis_estimate(mesh, P: int) -> float:  # noqa: N803 - the papers' name
    """Upper estimate (seconds) of METIS k-way of ``mesh`` into ``P`` parts, O(1)."""
    size = mesh.n + len(mesh.graph.indices)
    return KVMETIS_SECONDS_PER_ITEM_LEVEL * size * max(float(np.log2(max(P, 2))), 1.0)


def _partition(mesh, hierarchy: Hierarchy, arch, method: str, epsilon: float, seed: int,
               time_limit: float | None, backend: str, notes: list[str]) -> Partition:
    speeds = np.asarray(arch.speeds, dtype=np.float64)
    if method == method_names.RB:
        # block b is PE b's until a mapping moves it (only with equal speeds)
        return rb_partition(mesh, speeds, epsilon=epsilon, seed=seed, backend=backend)
    if method == method_names.RMS:
        return rms_partition(mesh, hierarchy, speeds=speeds, epsilon=epsilon, seed=seed,
                             backend=backend)
    objective, sparse = _ARCHAWARE[method]
    if backend != DEFAULT_BACKEND:
        raise PartitionError(f"{method} uses METIS as its predictor; backend {backend!r} "
                             f"applies to rb and rms only")
    predicted = None
    start = time.perf_counter()
    estimate = kvmetis_estimate(mesh, hierarchy.n)
    if time_limit is not None and estimate > PREDICTOR_SHARE * time_limit:
        # METIS k-way into P parts would take the budget: the speed-targeted RMS
        # partition (about half its time on large meshes, block = PE along the tree) is
        # the predictor instead, and the corrector gets what is left
        predicted = rms_partition(mesh, hierarchy, speeds=speeds, epsilon=epsilon,
                                  seed=seed).part
        notes.append(f"predictor: the speed-targeted RMS partition, not METIS k-way (about "
                     f"{estimate:.0f} s estimated for {hierarchy.n} parts, over "
                     f"{PREDICTOR_SHARE:g} of the {time_limit:g} s budget)")
        time_limit -= time.perf_counter() - start
    result = archaware_partition(mesh, arch, objective=objective, sparse=sparse,
                                 epsilon=epsilon, seed=seed, time_limit=max(time_limit, 1e-9)
                                 if time_limit is not None else None, predicted=predicted)
    if predicted is not None and np.array_equal(result.part, predicted):
        notes.append(f"{method}: no corrector pass fitted the time left; the RMS "
                     f"partition is kept")
    return result
