"""Communication patterns generated for the job's task count.

Each generator returns a :class:`~mapper.CommGraph` over ``n`` ranks (volumes in
bytes per step, ``bytes=`` scales them) built with numpy.  A spec is ``NAME[:ARGS]``
with comma-separated ARGS: grid dimensions ``AxBxC`` and ``key=value`` options, e.g.
``stencil3d``, ``stencil3d:4x4x4,bytes=1e6``, ``ring``; ``exchange=axes`` makes a
stencil's dimensions phases (a code that exchanges one dimension after the other).
The NAS Parallel Benchmarks patterns follow the published process layouts of NPB
3.x (CG's 2D grid, BT/SP's square multi-partition grid, LU's 2D wavefront, MG's 3D
grid, FT's transposes); they are models of who talks to whom, with volumes
proportional to the surfaces exchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mapper import CommGraph
from mapper.errors import RankmapError
from mapper.model.phased_graph import (
    PIPELINE_BYTES,
    Phase,
    PhasedGraph,
    make_phase,
    phases_sum,
    with_phases,
)


class GeneratorError(RankmapError, ValueError):
    """A generator spec that does not fit the job; the message says why."""


@dataclass(frozen=True)
class Spec:
    name: str
    dims: tuple[int, ...] | None
    options: dict[str, str]


def parse_spec(spec: str) -> Spec:
    """``stencil3d:4x4x4,bytes=1e6`` → Spec('stencil3d', (4, 4, 4), {'bytes': '1e6'})."""
    name, _, args = spec.partition(":")
    dims = None
    options: dict[str, str] = {}
    for arg in filter(None, (a.strip() for a in args.split(","))):
        if "=" in arg:
            k, _, v = arg.partition("=")
            options[k.strip()] = v.strip()
        elif arg == "periodic":
            options["periodic"] = "1"
        else:
            try:
                dims = tuple(int(x) for x in arg.lower().split("x"))
            except ValueError:
                raise GeneratorError(f"{spec!r}: {arg!r} is neither dimensions AxBxC nor "
                                     f"key=value") from None
            if min(dims) < 1:
                raise GeneratorError(f"{spec!r}: dimensions must be positive")
    if name not in GENERATORS:
        raise GeneratorError(f"unknown generator {name!r} (known: {', '.join(GENERATORS)})")
    return Spec(name, dims, options)


def is_generator_spec(spec: str) -> bool:
    return spec.partition(":")[0] in GENERATORS


def near_factors(n: int, k: int) -> tuple[int, ...]:
    """k factors of n as close to n^(1/k) as possible, largest first."""
    if k == 1:
        return (n,)
    best: tuple[int, ...] | None = None
    target = n ** (1.0 / k)
    for a in divisors(n):
        rest = near_factors(n // a, k - 1)
        cand = tuple(sorted((a,) + rest, reverse=True))
        if best is None or _spread(cand, target) < _spread(best, target):
            best = cand
    assert best is not None
    return best


def divisors(n: int) -> list[int]:
    """The divisors of n in increasing order, by trial division up to sqrt(n):
    O(sqrt(n)) (near_factors scanned 1..n, a million steps for a 2^20-rank job)."""
    small = [a for a in range(1, math.isqrt(n) + 1) if n % a == 0]
    return small + [n // a for a in reversed(small) if a * a != n]


def _spread(f: tuple[int, ...], target: float) -> float:
    return sum(abs(math.log(x / target)) for x in f)


def _grid_edges(dims: tuple[int, ...], periodic: bool, stride: int = 1,
                axes: tuple[int, ...] | None = None):
    """Neighbour pairs at ``stride`` along every dimension (or only ``axes``)."""
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src, dst = [], []
    for ax, size in enumerate(dims):
        if size <= stride or (axes is not None and ax not in axes):
            continue
        a = np.take(idx, range(size - stride), axis=ax).ravel()
        b = np.take(idx, range(stride, size), axis=ax).ravel()
        src.append(a)
        dst.append(b)
        if periodic and size > 2 * stride:
            src.append(np.take(idx, range(size - stride, size), axis=ax).ravel())
            dst.append(np.take(idx, range(0, stride), axis=ax).ravel())
    if not src:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(src), np.concatenate(dst)


def _dims(spec: Spec, n: int, k: int) -> tuple[int, ...]:
    if spec.dims is None:
        return near_factors(n, k)
    if len(spec.dims) != k:
        raise GeneratorError(f"{spec.name}: expected {k} dimensions, got "
                             f"{'x'.join(map(str, spec.dims))}")
    # math.prod, exact: np.prod wraps around in int64, and 4x4611686018427387905 made
    # "4 ranks", then a reshape to that shape failed with a traceback
    ranks = math.prod(spec.dims)
    if ranks != n:
        raise GeneratorError(f"{spec.name}: dimensions {'x'.join(map(str, spec.dims))} make "
                             f"{ranks} ranks but the job has {n} tasks")
    return spec.dims


def _volume(spec: Spec) -> float:
    try:
        v = float(spec.options.get("bytes", "1"))
    except ValueError:
        raise GeneratorError(f"{spec.name}: bytes={spec.options['bytes']!r} is not a number"
                             ) from None
    if not v > 0:
        raise GeneratorError(f"{spec.name}: bytes must be positive")
    return v


def _graph(src, dst, w, n: int, spec: Spec) -> CommGraph:
    return CommGraph.from_edges(np.asarray(src), np.asarray(dst), np.asarray(w, dtype=float),
                                n=n, source=f"generator {spec.name}")


#: ``exchange=`` of the stencils: ``all`` (every face at once, the default) or ``axes``
#: (one dimension after the other, each a phase)
STENCIL_EXCHANGES = ("all", "axes")


def _exchange(spec: Spec) -> str:
    value = spec.options.get("exchange", "all")
    if value not in STENCIL_EXCHANGES:
        raise GeneratorError(f"{spec.name}: exchange={value!r} is not one of "
                             f"{', '.join(STENCIL_EXCHANGES)}")
    return value


def _own_phase(src, dst, volume: float, n: int, spec: Spec, name: str,
               pace: str = "") -> Phase:
    """A phase of the pairs (src, dst), each of ``volume``, in which every rank waits
    only for its own messages: its own synchronising group (labels built directly:
    :func:`~mapper.model.phased_graph.sync_labels` would loop over n one-rank groups); O(n + m)."""
    return Phase(_graph(src, dst, np.full(len(src), volume), n, spec), 1.0,
                 np.arange(n, dtype=np.int64), name, pace)


def _stencil(spec: Spec, n: int, k: int) -> CommGraph:
    """The stencil's graph; with ``exchange=axes`` a :class:`~mapper.model.phased_graph.PhasedGraph`
    whose phases are the dimensions' exchanges in order, each rank its own
    synchronising group (it waits for its own messages along one dimension before it
    starts the next, for nobody else's).  Codes that exchange one dimension after the
    other, so that three pairs of messages also fill the halo's edges and corners
    (LAMMPS's ghost exchange, many structured-grid codes), send that way, and two
    placements with the same link loads in total then differ in how the dimensions'
    bottlenecks add up per rank (measured: bench/README.md, "A halo exchanged by
    dimension").  O(n·k)."""
    exchange = _exchange(spec)
    dims = _dims(spec, n, k)
    periodic = spec.options.get("periodic") == "1"
    vol = _volume(spec)
    s, d = _grid_edges(dims, periodic)
    total = _graph(s, d, np.full(len(s), vol), n, spec)
    if exchange == "all":
        return total
    phases = [_own_phase(*_grid_edges(dims, periodic, axes=(axis,)), vol, n, spec,
                         f"dimension {axis} exchange") for axis in range(k)]
    return with_phases(total, phases)


def stencil2d(spec: Spec, n: int) -> CommGraph:
    """5-point stencil on a near-square 2D grid (or the given AxB), halo exchange;
    ``exchange=axes``: by dimension, as phases (:func:`_stencil`)."""
    return _stencil(spec, n, 2)


def stencil3d(spec: Spec, n: int) -> CommGraph:
    """7-point stencil on a near-cubic 3D grid (or the given AxBxC), halo exchange;
    ``exchange=axes``: by dimension, as phases (:func:`_stencil`)."""
    return _stencil(spec, n, 3)


def ring(spec: Spec, n: int) -> CommGraph:
    """Rank r exchanges with r+1 (mod n)."""
    if n < 2:
        raise GeneratorError("ring needs at least 2 ranks")
    r = np.arange(n)
    src, dst = (r[:-1], r[1:]) if n == 2 else (r, (r + 1) % n)
    return _graph(src, dst, np.full(len(src), _volume(spec)), n, spec)


def alltoall(spec: Spec, n: int) -> CommGraph:
    """Every pair of ranks exchanges the same volume."""
    a, b = np.triu_indices(n, 1)
    return _graph(a, b, np.full(len(a), _volume(spec)), n, spec)


def _recursive_doubling_edges(ranks: np.ndarray):
    """Partners r xor 2^k among ``len(ranks)`` ranks; extra ranks fold into the first p."""
    m = len(ranks)
    p = 1 << (m.bit_length() - 1) if m else 0
    src, dst = [], []
    k = 1
    base = np.arange(p)
    while k < p:
        lo = base[(base & k) == 0]
        src.append(ranks[lo])
        dst.append(ranks[lo | k])
        k <<= 1
    if m > p:  # fold-in: rank p+i sends to and receives from rank i
        src.append(ranks[p:])
        dst.append(ranks[: m - p])
    if not src:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(src), np.concatenate(dst)


def recursive_doubling(spec: Spec, n: int) -> CommGraph:
    """Allreduce by recursive doubling: partners r xor 2^k, log2(n) rounds (fold-in of
    the ranks beyond the largest power of two)."""
    s, d = _recursive_doubling_edges(np.arange(n))
    return _graph(s, d, np.full(len(s), _volume(spec)), n, spec)


def _power_of_two(n: int, name: str) -> int:
    if n < 1 or n & (n - 1):
        raise GeneratorError(f"{name} needs a power-of-two task count, got {n}")
    return n.bit_length() - 1


def npb_cg(spec: Spec, n: int) -> CommGraph:
    """NPB CG: 2D grid of nprows x npcols (npcols = nprows or 2 nprows, n a power of
    two); recursive-doubling reductions along each row plus the transpose partner."""
    rows, cols = _cg_grid(n)
    grid = np.arange(n).reshape(rows, cols)
    src, dst, w = [], [], []
    vol = _volume(spec)
    for r in range(rows):
        s, d = _recursive_doubling_edges(grid[r])
        src.append(s)
        dst.append(d)
        w.append(np.full(len(s), vol))
    # transpose exchange: rank (i, j) with (j mod rows, ...) as in NPB's exch_proc
    s, d = _cg_transpose(n, rows, cols)
    src.append(s)
    dst.append(d)
    w.append(np.full(len(s), vol))
    return _graph(np.concatenate(src), np.concatenate(dst), np.concatenate(w), n, spec)


def _cg_grid(n: int) -> tuple[int, int]:
    log = _power_of_two(n, "npb-cg")
    rows = 1 << (log // 2)
    return rows, n // rows


def npb_cg_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB CG by phase: :func:`npb_cg`'s graph (exactly) carrying log2(cols) row steps
    -- step k pairs (r, c) with (r, c xor 2^k), each process row synchronising only
    with itself -- then the transpose exchange, where every rank synchronises (it ends
    in the iteration's global dot-product allreduce).  NPB 3.x CG, conj_grad: the
    row-sum reduction's ``l = 1..l2npcols`` exchanges, then the ``exch_proc`` swap.
    O(n log n)."""
    rows, cols = _cg_grid(n)
    vol = _volume(spec)
    grid = np.arange(n).reshape(rows, cols)
    row_sets = [grid[r] for r in range(rows)]
    phases = []
    k = 1
    while k < cols:
        c = np.arange(cols)
        lo = c[(c & k) == 0]
        s, d = grid[:, lo].ravel(), grid[:, lo | k].ravel()
        g = _graph(s, d, np.full(len(s), vol), n, spec)
        phases.append(make_phase(g, groups=row_sets, name=f"row step {k.bit_length() - 1}"))
        k <<= 1
    s, d = _cg_transpose(n, rows, cols)
    phases.append(make_phase(_graph(s, d, np.full(len(s), vol), n, spec), name="transpose"))
    return with_phases(npb_cg(spec, n), phases)


def _cg_transpose(n: int, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """rank (i, j) → (j mod rows, …), as in NPB's exch_proc; self-partners dropped."""
    r_idx, c_idx = np.divmod(np.arange(n), cols)
    partner = (c_idx % rows) * cols + (r_idx * (cols // rows)) + (c_idx // rows)
    keep = partner != np.arange(n)
    return np.arange(n)[keep], partner[keep]


def _square(n: int, name: str) -> int:
    q = math.isqrt(n)
    if q * q != n:
        raise GeneratorError(f"{name} needs a square task count (NPB's square process grid), "
                             f"got {n}")
    return q


def _bt_edges(q: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The multi-partition grid's pairs by direction: (x: along grid dimension 1,
    y: along dimension 0, z: the diagonal successor), self-pairs dropped."""
    n = q * q
    x = _grid_edges((q, q), periodic=True, axes=(1,))
    y = _grid_edges((q, q), periodic=True, axes=(0,))
    r, c = np.divmod(np.arange(n), q)
    diag = ((r + 1) % q) * q + (c + 1) % q
    keep = diag != np.arange(n)
    return x, y, (np.arange(n)[keep], diag[keep])


def _bt_grid(spec: Spec, n: int) -> int:
    q = _square(n, spec.name)
    if q < 2:
        raise GeneratorError(f"{spec.name} needs at least 4 ranks")
    return q


def npb_bt(spec: Spec, n: int) -> CommGraph:
    """NPB BT/SP multi-partition: a sqrt(n) x sqrt(n) periodic grid; each rank exchanges
    with its four grid neighbours (x and y sweeps) and its diagonal successor and
    predecessor (the z sweep's cell shift)."""
    edges = _bt_edges(_bt_grid(spec, n))
    src = np.concatenate([e[0] for e in edges])
    dst = np.concatenate([e[1] for e in edges])
    return _graph(src, dst, np.full(len(src), _volume(spec)), n, spec)


#: BT's values per face point and iteration on a pair of neighbour cells: the face copy
#: sends 5 variables x 2 layers each way (20); a line solve sends C' and rhs' forward
#: (25 + 5) and rhs back (5) in its own direction (35).  NPB 3.x BT ``copy_faces``,
#: ``x_send_solve_info``, ``x_send_backsub_info``.
BT_FACE_COPY, BT_SOLVE = 20.0, 35.0


def npb_bt_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB BT/SP by phase: :func:`npb_bt`'s graph (to rounding) carrying, in NPB 3.x's
    order, the face copy (``copy_faces``: every face sent at once, 20/55 of each pair's
    volume) and then the x, y and z line solves (``x_solve``, ``y_solve``,
    ``z_solve``: each pipelined along its own direction, 35/55 of that direction's
    pairs; pace "stages", :attr:`mapper.model.phased_graph.Phase.pace`: cell after cell, a rank
    receives from its predecessor and sends to its successor, then back).  Every rank
    waits only for its own messages (its own synchronising group).
    The split is BT's counts (:data:`BT_FACE_COPY`, :data:`BT_SOLVE`); SP's scalar
    solves send fewer values per face point, and SP is given BT's split.  O(n)."""
    total = npb_bt(spec, n)
    x, y, z = _bt_edges(_bt_grid(spec, n))
    vol = _volume(spec)
    share = BT_FACE_COPY / (BT_FACE_COPY + BT_SOLVE)
    s = np.concatenate([x[0], y[0], z[0]])
    d = np.concatenate([x[1], y[1], z[1]])
    phases = [_own_phase(s, d, vol * share, n, spec, "face copy")]
    phases += [_own_phase(a, b, vol * (1.0 - share), n, spec, name, pace="stages")
               for name, (a, b) in zip(("x solve", "y solve", "z solve"), (x, y, z),
                                       strict=True)]
    return with_phases(total, phases)


def npb_lu(spec: Spec, n: int) -> CommGraph:
    """NPB LU: 2D grid (near-square), pipelined wavefront with the four non-periodic
    neighbours."""
    dims = _dims(spec, n, 2)
    s, d = _grid_edges(dims, periodic=False)
    return _graph(s, d, np.full(len(s), _volume(spec)), n, spec)


def npb_lu_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB LU by phase: :func:`npb_lu`'s graph (to rounding) carrying the SSOR sweeps'
    wavefront (``blts``/``buts`` via ``exchange_1``: each k-plane's 5 values per face
    point received from north and west and sent south and east, then back -- both
    dimensions at once, 1/3 of each pair's volume; pace "sweep",
    :attr:`mapper.model.phased_graph.Phase.pace`: LU's rank order is the pipeline's, north and
    west the lower-numbered neighbours) and then ``rhs``'s halo exchange
    (``exchange_3``: 10 values per face point each way, north-south first, then
    east-west -- a phase per dimension, 2/3).  Every rank waits only for its own
    neighbours.  O(n)."""
    total = npb_lu(spec, n)
    dims = _dims(spec, n, 2)
    vol = _volume(spec)
    s, d = _grid_edges(dims, periodic=False)
    phases = [_own_phase(s, d, vol / 3.0, n, spec, "wavefront", pace="sweep")]
    for axis in range(2):
        a, b = _grid_edges(dims, periodic=False, axes=(axis,))
        if len(a):
            phases.append(_own_phase(a, b, vol * 2.0 / 3.0, n, spec,
                                     f"dimension {axis} exchange"))
    return with_phases(total, phases)


def _mg_levels(dims: tuple[int, ...], vol: float):
    """(stride, volume) of each multigrid level, finest first."""
    stride, level_vol = 1, vol
    while stride < max(dims):
        yield stride, level_vol
        stride *= 2
        level_vol /= 4


def npb_mg(spec: Spec, n: int) -> CommGraph:
    """NPB MG: 3D periodic grid; neighbours at strides 1, 2, 4, … for the coarser
    multigrid levels, each coarser level a quarter of the volume of the finer.  With
    ``class=`` (S, W, A–E): NPB 3.x MG's own exchanges for that class
    (:func:`npb_mg_class_phases`)."""
    if "class" in spec.options:
        return npb_mg_class_phases(spec, n)
    dims = _dims(spec, n, 3)
    src, dst, w = [], [], []
    for stride, level_vol in _mg_levels(dims, _volume(spec)):
        s, d = _grid_edges(dims, periodic=True, stride=stride)
        src.append(s)
        dst.append(d)
        w.append(np.full(len(s), level_vol))
    if not src:
        return _graph(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [], n, spec)
    return _graph(np.concatenate(src), np.concatenate(dst), np.concatenate(w), n, spec)


def npb_mg_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB MG by phase: :func:`npb_mg`'s graph (exactly) carrying, level by level
    (finest first), one phase per dimension: NPB 3.x MG's ``comm3`` exchanges the
    borders one axis after the other (``ready``, ``give3`` to both sides, ``take3``),
    each rank waiting only for its own two neighbours (its own synchronising group).
    O(n log n).  With ``class=``: :func:`npb_mg_class_phases`."""
    if "class" in spec.options:
        return npb_mg_class_phases(spec, n)
    total = npb_mg(spec, n)
    dims = _dims(spec, n, 3)
    phases = []
    for level, (stride, level_vol) in enumerate(_mg_levels(dims, _volume(spec))):
        for axis in range(3):
            a, b = _grid_edges(dims, periodic=True, stride=stride, axes=(axis,))
            if len(a):
                phases.append(_own_phase(a, b, level_vol, n, spec,
                                         f"level {level} dimension {axis} exchange"))
    if not phases:  # one rank: no level has a neighbour
        none = np.zeros(0, dtype=np.int64)
        phases = [_own_phase(none, none, 0.0, n, spec, "level 0")]
    return with_phases(total, phases)


#: NPB MG's grid points per side by class (NPB 3.x ``npbparams``: MG's nx = ny = nz)
NPB_MG_CLASSES = {"S": 32, "W": 128, "A": 256, "B": 256, "C": 512, "D": 1024, "E": 2048}
#: Bytes per grid point MG sends (double precision)
MG_POINT_BYTES = 8
#: NPB 3.x MG's iterations by class (``setparams``' nit); a run does one more first,
#: untimed
NPB_MG_ITERATIONS = {"S": 4, "W": 4, "A": 4, "B": 20, "C": 20, "D": 50, "E": 50}
#: MG's allreduces on MPI_COMM_WORLD in a run: ``zran3`` (called twice) 4 for each of
#: its 10 extreme points, ``norm2u3`` (called four times) 2
MG_ALLREDUCES = 2 * 4 * 10 + 4 * 2
#: Bytes of MG's largest allreduce (``zran3``'s four integers of a point's position)
MG_ALLREDUCE_BYTES = 16


def _mg_class_size(spec: Spec, n: int) -> int:
    value = spec.options["class"].strip().upper()
    if value not in NPB_MG_CLASSES:
        raise GeneratorError(f"{spec.name}: class={spec.options['class']!r} is not one of "
                             f"{', '.join(NPB_MG_CLASSES)}")
    if "bytes" in spec.options:
        raise GeneratorError(f"{spec.name}: class= gives the messages' sizes; bytes= "
                             f"cannot be given with it")
    if n & (n - 1):
        raise GeneratorError(f"{spec.name}: NPB MG runs on a power of two of ranks, "
                             f"not {n}")
    size = NPB_MG_CLASSES[value]
    if n > size ** 3:
        raise GeneratorError(f"{spec.name}: class {value} ({size}^3 points) has fewer "
                             f"points than the job's {n} ranks")
    return size


def _mg_process_grid(spec: Spec, n: int) -> tuple[int, int, int]:
    """NPB MG's process grid (pi(1), pi(2), pi(3)) of ``setup``, x fastest in the rank
    number; given dimensions must be it (as ``npb-mg:ZxYxX``, the slowest first)."""
    log_p = n.bit_length() - 1
    dx = log_p // 3
    dy = (log_p - dx) // 2
    grid = (2 ** dx, 2 ** dy, n // 2 ** (dx + dy))
    if spec.dims is not None and tuple(spec.dims) != grid[::-1]:
        raise GeneratorError(f"{spec.name}: with class=, NPB MG's own process grid "
                             f"{'x'.join(map(str, grid[::-1]))} is used, not "
                             f"{'x'.join(map(str, spec.dims))}")
    return grid


def npb_mg_class_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB 3.x MG's border exchanges for its class (``npb-mg:class=A``), by phase.

    Follows MG's ``setup`` and ``comm3``: the process grid pi = (2^⌊log p/3⌋, …), x
    fastest; level k (finest first, 2^k points a side) gives rank r along each axis
    the points ⌊(idi+1)·ng/pi⌋ - ⌊idi·ng/pi⌋; a rank with none there, or whose
    neighbour at distance ``next`` has none, doubles ``next`` (coarse levels skip the
    idle ranks: partners 2, 4, … planes apart); a rank with a point on every axis
    exchanges, axis after axis, its two borders with ranks idi ± next ((m2-2)(m3-2),
    m1(m3-2) and m1·m2 points, ``give3``).  One phase per level and axis, repeated as
    often as MG calls ``comm3`` there in an iteration (``resid``, ``psinv`` and
    ``rprj3``: three times, twice on the coarsest level).  When every message is at
    most :data:`mapper.model.phased_graph.PIPELINE_BYTES` the phases are exchange rounds (pace
    ``"rounds"``, :func:`mapper.objectives.phase_time.round_latency`): NPB MG class A at 512
    ranks runs slower than block under a placement with less volume on every link, all
    of it latency.  All or none, as the trace importer splits rounds: marking only the
    coarser levels' rounds at 256 ranks made the plan keep block where faster placements
    exist (bench/README.md, "NPB MG by class").  With rounds, MG's allreduces are rounds too
    (:func:`_mg_allreduce_rounds`); without, their few bytes are left out, as are
    ``comm3_ex``'s expansion messages (to the finer level's partners), MG's broadcasts,
    reduces and barriers, and messages a rank sends itself.  O(n log size)."""
    size = _mg_class_size(spec, n)
    pi = np.array(_mg_process_grid(spec, n), dtype=np.int64)
    me = np.arange(n, dtype=np.int64)
    idi = np.stack([me % pi[0], (me // pi[0]) % pi[1], me // (pi[0] * pi[1])])
    lt = size.bit_length() - 1
    nxt = np.ones((3, n), dtype=np.int64)
    exchanges = []
    for k in range(lt, 0, -1):
        ng = 2 ** k
        p = pi[:, None]
        mi = 2 + ((idi + 1) * ng) // p - (idi * ng) // p
        mip = 2 + ((nxt + idi + 1) * ng) // p - ((nxt + idi) * ng) // p
        nxt = np.where((mip == 2) | (mi == 2), 2 * nxt, nxt)
        alive = np.all(mi > 2, axis=0)
        points = ((mi[1] - 2) * (mi[2] - 2), mi[0] * (mi[2] - 2), mi[0] * mi[1])
        for ax in range(3):
            src, dst, nbytes = [], [], []
            for sign in (1, -1):
                other = idi.copy()
                other[ax] = (idi[ax] + sign * nxt[ax]) % pi[ax]
                to = other[0] + pi[0] * (other[1] + pi[1] * other[2])
                keep = alive & (to != me)
                src.append(me[keep])
                dst.append(to[keep])
                nbytes.append(MG_POINT_BYTES * points[ax][keep])
            exchanges.append((lt - k, ax, np.concatenate(src), np.concatenate(dst),
                              np.concatenate(nbytes), 2.0 if k == 1 else 3.0))
    small = max((float(b.max()) for *_, b, _ in exchanges if len(b)), default=0.0
                ) <= PIPELINE_BYTES
    phases = [Phase(_graph(s, d, b, n, spec), repeat, np.arange(n, dtype=np.int64),
                    f"level {level} dimension {ax} exchange", "rounds" if small else "")
              for level, ax, s, d, b, repeat in exchanges if len(s)]
    if small:
        phases += _mg_allreduce_rounds(spec, n)
    if not phases:  # one rank per level everywhere: nobody to talk to
        none = np.zeros(0, dtype=np.int64)
        phases = [_own_phase(none, none, 0.0, n, spec, "level 0")]
    total = CommGraph.from_matrix(phases_sum(phases, n), directed=False,
                                  source=f"generator {spec.name}")
    return with_phases(total, phases)


def _mg_allreduce_rounds(spec: Spec, n: int) -> list[Phase]:
    """NPB MG's allreduces (:data:`MG_ALLREDUCES` in a run, spread over its
    ``nit + 1`` iterations, the untimed first one included) as exchange rounds:
    recursive doubling, one round per step ``r xor 2^k``, as MPICH runs an allreduce of
    a few bytes and :mod:`slurm_plugin.profiles.collectives` expands one (a binomial
    reduce and broadcast pair the same ranks 2^k apart).  Their rounds follow rank order:
    at 512 ranks (class A, SMPI, 4:1 3-level tree) Slurm's nodes regrouped under other
    leaves ran 40 of them in 1.84 ms against block's 1.76 (latencies alone), and the
    whole run at 1.0026x block's time, though its borders cross no more links than
    block's and with every latency at 0 it runs 0.75x.  O(n log n)."""
    repeat = MG_ALLREDUCES / (NPB_MG_ITERATIONS[spec.options["class"].strip().upper()] + 1)
    me = np.arange(n, dtype=np.int64)
    rounds = []
    for k in range(n.bit_length() - 1):
        other = me ^ (1 << k)
        rounds.append(Phase(_graph(me, other, np.full(n, float(MG_ALLREDUCE_BYTES)), n,
                                   spec),
                            repeat, me.copy(), f"allreduce step {k}", "rounds"))
    return rounds


def _row_col_alltoall(rows: int, cols: int):
    grid = np.arange(rows * cols).reshape(rows, cols)
    src, dst = [], []
    a, b = np.triu_indices(cols, 1)
    src.append(grid[:, a].ravel())
    dst.append(grid[:, b].ravel())
    a, b = np.triu_indices(rows, 1)
    src.append(grid[a, :].ravel())
    dst.append(grid[b, :].ravel())
    return np.concatenate(src), np.concatenate(dst)


def npb_ft(spec: Spec, n: int) -> CommGraph:
    """NPB FT 2D layout: transposes are all-to-alls within every row and every column
    of a near-square process grid."""
    rows, cols = _dims(spec, n, 2)
    s, d = _row_col_alltoall(rows, cols)
    return _graph(s, d, np.full(len(s), _volume(spec)), n, spec)


def npb_ft_phases(spec: Spec, n: int) -> PhasedGraph:
    """NPB FT by phase: :func:`npb_ft`'s graph (exactly) carrying the all-to-all within
    every process row (each row synchronising with itself), then the one within every
    column (each column with itself) -- the two transposes of NPB 3.x FT's 2D layout
    (``transpose_x_y``/``transpose_y_z`` over the row and column communicators).
    O(n·(rows + cols))."""
    rows, cols = _dims(spec, n, 2)
    vol = _volume(spec)
    grid = np.arange(n).reshape(rows, cols)
    a, b = np.triu_indices(cols, 1)
    s, d = grid[:, a].ravel(), grid[:, b].ravel()
    row_phase = make_phase(_graph(s, d, np.full(len(s), vol), n, spec),
                           groups=list(grid), name="row all-to-all")
    a, b = np.triu_indices(rows, 1)
    s, d = grid[a, :].ravel(), grid[b, :].ravel()
    col_phase = make_phase(_graph(s, d, np.full(len(s), vol), n, spec),
                           groups=list(grid.T), name="column all-to-all")
    return with_phases(npb_ft(spec, n), [row_phase, col_phase])


def summa(spec: Spec, n: int) -> CommGraph:
    """SUMMA matrix multiply on a near-square 2D grid: every step broadcasts panels
    along rows and columns, so each rank talks to all ranks of its row and column."""
    rows, cols = _dims(spec, n, 2)
    s, d = _row_col_alltoall(rows, cols)
    return _graph(s, d, np.full(len(s), _volume(spec)), n, spec)


def _count(spec: Spec, key: str) -> int:
    """A positive integer option (default 1)."""
    raw = spec.options.get(key, "1")
    try:
        value = int(raw)
    except ValueError:
        raise GeneratorError(f"{spec.name}: {key}={raw!r} is not an integer") from None
    if value < 1:
        raise GeneratorError(f"{spec.name}: {key} must be at least 1, got {value}")
    return value


def _kba(spec: Spec, n: int, messages: int) -> CommGraph:
    """KBA sweep on a PX x PY process grid (near-square, or the given PXxPY).

    The 8 octants start from the grid's 4 corners, two per corner (+z and -z); in each
    sweep every rank sends ``messages`` messages of ``bytes`` to its downstream x and
    y neighbours.  Every grid edge is downstream in one direction or the other for
    each of the 4 corners, so over a full iteration each undirected edge of the
    non-periodic 2D mesh carries 8 x messages x bytes, whatever its position (corner
    ranks only lack neighbours).  Pipeline order matters for time, not for J.
    """
    dims = _dims(spec, n, 2)
    s, d = _grid_edges(dims, periodic=False)
    return _graph(s, d, np.full(len(s), 8.0 * messages * _volume(spec)), n, spec)


def sweep3d(spec: Spec, n: int) -> CommGraph:
    """Sweep3D-like wavefront (LANL's discrete-ordinates kernel, KBA decomposition of
    the i-j plane, k on the rank): ``sweep3d:PXxPY,angles=A,blocks=K``.  Per octant a
    rank sends its outgoing angular flux to the downstream x and y neighbour once per
    pipelined block — ``angles`` angle blocks (mmi) times ``blocks`` k-plane blocks
    (mk) — each message ``bytes``: 8 A K bytes per mesh edge (see :func:`_kba`)."""
    return _kba(spec, n, _count(spec, "angles") * _count(spec, "blocks"))


def snap(spec: Spec, n: int) -> CommGraph:
    """SNAP-like sweep (LANL's SN proxy, KBA over its y-z plane, x on the rank):
    ``snap:PYxPZ,angles=A,groups=G,chunks=C``.  The difference from Sweep3D modelled
    here: one message carries every energy group and every angle of the octant (A G x
    ``bytes``, ``bytes`` being one angle of one group on one chunk face), and an
    octant is pipelined in ``chunks`` x-chunks (ichunk), so a mesh edge carries
    8 C A G bytes.  Multi-group problems thus weigh the same mesh by the number of
    groups; the graph's shape is Sweep3D's."""
    return _kba(spec, n, _count(spec, "chunks") * _count(spec, "angles")
                * _count(spec, "groups"))


GENERATORS: dict[str, Callable[[Spec, int], CommGraph]] = {
    "stencil2d": stencil2d, "stencil3d": stencil3d, "ring": ring, "alltoall": alltoall,
    "recursive-doubling": recursive_doubling, "npb-cg": npb_cg, "npb-bt": npb_bt,
    "npb-sp": npb_bt, "npb-lu": npb_lu, "npb-mg": npb_mg, "npb-ft": npb_ft, "summa": summa,
    "sweep3d": sweep3d, "snap": snap,
}


#: the generators that can also give their graph by phase (:func:`generate_phases`)
PHASED_GENERATORS: dict[str, Callable[[Spec, int], PhasedGraph]] = {
    "npb-cg": npb_cg_phases, "npb-ft": npb_ft_phases, "npb-mg": npb_mg_phases,
    "npb-lu": npb_lu_phases, "npb-bt": npb_bt_phases, "npb-sp": npb_bt_phases,
}


def _has_phases(spec: Spec) -> bool:
    """The families of :data:`PHASED_GENERATORS`, and the stencils with
    ``exchange=axes``."""
    return spec.name in PHASED_GENERATORS or (spec.name in ("stencil2d", "stencil3d")
                                              and _exchange(spec) == "axes")


def generate(spec: str, ntasks: int) -> CommGraph:
    """The pattern ``spec`` sized to ``ntasks`` ranks; for the families of
    :data:`PHASED_GENERATORS` (and the stencils with ``exchange=axes``) carrying its
    phases (a :class:`~mapper.model.phased_graph.PhasedGraph` whose total is the family's graph,
    exactly), which the never-worse rule checks."""
    parsed = parse_spec(spec)
    if ntasks < 1:
        raise GeneratorError(f"{spec}: the job has no tasks")
    if parsed.name in PHASED_GENERATORS:
        return PHASED_GENERATORS[parsed.name](parsed, ntasks)
    return GENERATORS[parsed.name](parsed, ntasks)


def generate_phases(spec: str, ntasks: int) -> PhasedGraph:
    """The pattern ``spec`` at ``ntasks`` ranks by phase: the graph :func:`generate`
    returns, exactly, carrying its phases (:mod:`mapper.objectives.phase_time`).  Only the families
    of :data:`PHASED_GENERATORS` and the stencils with ``exchange=axes`` know their
    phases; the others are refused."""
    parsed = parse_spec(spec)
    if ntasks < 1:
        raise GeneratorError(f"{spec}: the job has no tasks")
    if not _has_phases(parsed):
        raise GeneratorError(f"{parsed.name}: no phases modelled (generators with phases: "
                             f"{', '.join(PHASED_GENERATORS)}; stencil2d and stencil3d "
                             f"with exchange=axes)")
    if parsed.name in PHASED_GENERATORS:
        return PHASED_GENERATORS[parsed.name](parsed, ntasks)
    graph = GENERATORS[parsed.name](parsed, ntasks)
    assert isinstance(graph, PhasedGraph)
    return graph
