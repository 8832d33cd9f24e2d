"""Import SimGrid SMPI time-independent (TI) traces as a communication profile.

Record with ``smpirun -trace-ti --cfg=tracing/filename:PREFIX ... ./app``.  SimGrid
3.32 writes PREFIX (an index: one per-rank file path a line, relative to the working
directory of the run, which is also tried relative to the index) and
``PREFIX_files/<stamp>_rank-<k>.txt``; ``--cfg=tracing/smpi/format/ti-one-file:yes``
puts all ranks into one file.  Either kind of file, or several, can be given: each
line starts with the (0-based, MPI_COMM_WORLD) rank that executed it.  Line formats,
as SimGrid 3.32 writes them (checked by tracing a small program that calls most of them;
COUNT is in elements of the datatype DT, a SimGrid datatype id, see
:data:`DATATYPE_BYTES`; a missing DT means MPI_BYTE)::

    R send|isend|ssend|issend|bsend|ibsend|rsend|irsend DST TAG COUNT [DT]
    R recv|irecv SRC TAG COUNT [DT]                     (the sender's line counts)
    R sendRecv SENDCOUNT DST RECVCOUNT SRC [DT1 DT2]
    R bcast|ibcast COUNT [ROOT [DT]]
    R reduce|ireduce COUNT COMP [ROOT [DT]]
    R allreduce|iallreduce|scan|exscan COUNT COMP [DT]
    R alltoall|ialltoall|allgather|iallgather SENDCOUNT RECVCOUNT [DT1 DT2]
    R gather|igather|scatter|iscatter SENDCOUNT RECVCOUNT [ROOT [DT1 DT2]]
    R alltoallv SENDBUF C_0..C_n-1 RECVBUF R_0..R_n-1 [DT1 DT2]
    R allgatherv SENDCOUNT R_0..R_n-1 [DT1 DT2]
    R gatherv SENDCOUNT R_0..R_n-1 [ROOT [DT1 DT2]]
    R scatterv C_0..C_n-1 RECVCOUNT [ROOT [DT1 DT2]]
    R reducescatter R_0..R_n-1 COMP [DT]
    R init|finalize|barrier|ibarrier|compute F|sleep T|wait*|test*|location F L|comm_*

Every message is counted once, from its sender's line.  Collectives are expanded into
the messages each rank sends by the table shared with the recorder
(:mod:`slurm_plugin.profiles.collectives`: bcast a binomial tree from the root, reduce
the mirrored tree, allreduce and scan/exscan recursive doubling, alltoall(v) and
reduce_scatter pairwise exchange, allgather(v) a ring, gather(v)/scatter(v) linear,
barrier no volume); this module only reads each line's amount and root.  The TI
format does not name the communicator: like SimGrid's own replay, collectives are
expanded over MPI_COMM_WORLD.  Unknown lines are errors naming the file and line.

Complexity: O(lines + messages); each collective line is expanded with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from mapper import CommGraph
from mapper.errors import RankmapError
from mapper.model.phased_graph import PIPELINE_BYTES, PhasedGraph, make_phase, with_phases

from . import collectives
from .ti_rounds import exchange_rounds


class TraceError(RankmapError, ValueError):
    """A TI trace that cannot be read; the message names the file and line."""


class CollectiveMismatch(TraceError):
    """Ranks call different collectives (counts or operations): some are on
    sub-communicators, so the trace cannot be split into phases at collective calls."""


#: Sizes in bytes of SimGrid's predefined datatype ids (``smpi_datatype.cpp``'s
#: CREATE_MPI_DATATYPE list; LP64: long and pointers 8 bytes).
DATATYPE_BYTES: dict[str, int] = {
    "0": 8, "1": 4, "2": 1, "3": 2, "4": 8, "5": 4, "6": 1, "7": 8, "8": 1, "9": 1,
    "10": 2, "11": 4, "12": 8, "13": 8, "14": 16, "15": 4, "16": 1, "17": 1, "18": 2,
    "19": 4, "20": 8, "21": 1, "22": 2, "23": 4, "24": 8, "25": 8, "26": 16, "27": 32,
    "28": 8, "29": 8, "30": 8, "31": 16, "32": 16,
}

_SENDS = {"send", "isend", "ssend", "issend", "bsend", "ibsend", "rsend", "irsend"}
_IGNORED = {"init", "finalize", "barrier", "ibarrier", "compute", "sleep", "location",
            "recv", "irecv", "probe", "iprobe", "cpu"}
_IGNORED_PREFIXES = ("wait", "test", "comm_")

Edges = tuple[np.ndarray, np.ndarray, np.ndarray]  # src, dst, bytes


def _empty() -> Edges:
    z = np.zeros(0, dtype=np.int64)
    return z, z, np.zeros(0)


class _Line:
    """One trace line being decoded: fields, and where it came from for errors."""

    def __init__(self, fields: list[str], where: str) -> None:
        self.fields, self.where = fields, where

    def fail(self, why: str) -> TraceError:
        return TraceError(f"{self.where}: {why}: {' '.join(self.fields)[:120]!r}")

    def num(self, i: int, what: str) -> float:
        try:
            v = float(self.fields[i])
        except IndexError:
            raise self.fail(f"missing {what}") from None
        except ValueError:
            raise self.fail(f"{what} {self.fields[i]!r} is not a number") from None
        if not v >= 0:
            raise self.fail(f"{what} must not be negative")
        return v

    def rank_at(self, i: int, what: str, n: int) -> int:
        v = self.num(i, what)
        if v != int(v) or v >= n:
            raise self.fail(f"{what} {self.fields[i]} is not a rank below {n}")
        return int(v)

    def opt(self, i: int, default: str) -> str:
        return self.fields[i] if len(self.fields) > i and self.fields[i] else default

    def dt(self, i: int) -> int:
        """Bytes of the datatype in field i (MPI_BYTE when absent)."""
        tid = self.opt(i, "6")
        if tid not in DATATYPE_BYTES:
            raise self.fail(f"unknown datatype id {tid} (a derived datatype? SimGrid's "
                            f"predefined ids are 0-32)")
        return DATATYPE_BYTES[tid]

    def counts(self, start: int, n: int, what: str) -> np.ndarray:
        if len(self.fields) < start + n:
            raise self.fail(f"expected {n} {what} (one per rank) from field {start + 1}")
        try:
            v = np.array(self.fields[start:start + n], dtype=float)
        except ValueError:
            raise self.fail(f"{what} are not numbers") from None
        if (v < 0).any():
            raise self.fail(f"{what} must not be negative")
        return v


def _root(line: _Line, i: int, n: int) -> int:
    """The root in field i (0 when absent, as SimGrid writes it)."""
    f = line.fields
    return line.rank_at(i, "root", n) if len(f) > i and f[i] else 0


def _collective(line: _Line, op: str, n: int) -> tuple[int, float | np.ndarray]:
    """(root, amount in bytes) of a collective line, as :func:`collectives.expand`
    takes them: the fields differ per action (the module's docstring)."""
    f = line.fields
    if op in ("bcast", "reduce"):
        i = 3 if op == "bcast" else 4  # reduce has COMP before ROOT
        return _root(line, i, n), line.num(2, "count") * line.dt(i + 1)
    if op in ("allreduce", "scan", "exscan"):
        return 0, line.num(2, "count") * line.dt(4)
    if op in ("alltoall", "allgather"):
        return 0, line.num(2, "send count") * line.dt(4)
    if op in ("gather", "scatter"):
        return _root(line, 4, n), line.num(2, "send count") * line.dt(5)
    if op == "alltoallv":
        c = line.counts(3, n, "send counts")
        return 0, c * line.dt(4 + 2 * n)
    if op == "allgatherv":
        c = line.counts(3, n, "receive counts")
        return 0, c * line.dt(4 + n)
    if op == "gatherv":
        line.counts(3, n, "receive counts")
        root = line.rank_at(3 + n, "root", n) if len(f) > 3 + n and f[3 + n] else 0
        return root, line.num(2, "send count") * line.dt(4 + n)
    if op == "scatterv":
        c = line.counts(2, n, "send counts")
        root = line.rank_at(3 + n, "root", n) if len(f) > 3 + n and f[3 + n] else 0
        return root, c * line.dt(4 + n)
    if op == "reduce_scatter":
        c = line.counts(2, n, "receive counts")
        return 0, c * line.dt(3 + n)
    raise line.fail(f"unknown TI action {f[1]!r}")


def expand_line(line: _Line, rank: int, n: int) -> Edges:
    """The (src, dst, bytes) messages ``rank`` sends for one trace line; collectives
    through the shared table (:mod:`slurm_plugin.profiles.collectives`)."""
    f = line.fields
    low = f[1].lower()

    def sent(dst: np.ndarray | int, nbytes: np.ndarray | float) -> Edges:
        d = np.atleast_1d(np.asarray(dst, dtype=np.int64))
        w = np.broadcast_to(np.asarray(nbytes, dtype=float), d.shape).astype(float)
        return np.full(len(d), np.int64(rank)), d, w

    if low in _SENDS:
        return sent(line.rank_at(2, "destination", n), line.num(4, "count") * line.dt(5))
    if low == "sendrecv":
        return sent(line.rank_at(3, "destination", n), line.num(2, "send count") * line.dt(6))
    if low in _IGNORED or low.startswith(_IGNORED_PREFIXES):
        return _empty()
    op = collectives.canonical(low)
    if op is None:
        raise line.fail(f"unknown TI action {f[1]!r}")
    root, amount = _collective(line, op, n)
    return sent(*collectives.expand(op, rank, n, root, amount))


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The per-rank trace files: index files (lines that are paths) are expanded."""
    out: list[Path] = []
    for p in map(Path, paths):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"{p}: cannot read: {exc}") from None
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines and all(len(ln.split()) == 1 for ln in lines):  # trace lines have 2+ fields
            for no, ln in enumerate(lines, 1):
                cand = [Path(ln), p.parent / ln, p.parent / Path(ln).name]
                found = next((c for c in cand if c.is_file()), None)
                if found is None:
                    raise TraceError(f"{p}:{no}: trace file {ln} not found (tried "
                                     f"{', '.join(map(str, cand))})")
                out.append(found)
        else:
            out.append(p)
    if not out:
        raise TraceError("no trace files given")
    return out


def read_lines(text: str, source: str) -> list[tuple[int, _Line]]:
    """(rank, line) of every non-empty line of one file."""
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        line = _Line(fields, f"{source}:{no}")
        if len(fields) < 2 or not fields[0].isdigit():
            raise line.fail("expected 'RANK ACTION ...'")
        out.append((int(fields[0]), line))
    return out


def _read_all(paths: Sequence[str | Path], progress: Callable[[int, int], None] | None
              ) -> tuple[list[Path], list[tuple[int, _Line]], int]:
    """The trace files, their (rank, line)s in file order, and the rank count."""
    files = trace_files(paths)
    lines: list[tuple[int, _Line]] = []
    for i, path in enumerate(files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"{path}: cannot read: {exc}") from None
        lines.extend(read_lines(text, str(path)))
        if progress:
            progress(i + 1, len(files))
    if not lines:
        raise TraceError(f"{files[0]}: no trace lines")
    ranks = np.array([r for r, _ in lines])
    n = int(ranks.max()) + 1
    missing = np.setdiff1d(np.arange(n), ranks)
    if len(missing):
        raise TraceError(f"no trace lines for ranks {missing[:10].tolist()} of {n} "
                         f"(a per-rank file missing?)")
    return files, lines, n


def _graph(parts: Sequence[Edges], n: int, source: str) -> CommGraph:
    src = np.concatenate([p[0] for p in parts]) if parts else _empty()[0]
    dst = np.concatenate([p[1] for p in parts]) if parts else _empty()[1]
    w = np.concatenate([p[2] for p in parts]) if parts else _empty()[2]
    keep = (src != dst) & (w > 0)
    return CommGraph.from_edges(src[keep], dst[keep], w[keep], n=n, source=source)


def import_ti(paths: Sequence[str | Path],
              progress: Callable[[int, int], None] | None = None) -> CommGraph:
    """Read the traces into one undirected graph of bytes (volumes of both directions
    summed); ``progress(done, total)`` after each file is read."""
    files, lines, n = _read_all(paths, progress)
    parts = [expand_line(line, rank, n) for rank, line in lines]
    return _graph(parts, n, f"SMPI TI trace {files[0]}")


def _is_collective(line: _Line) -> bool:
    low = line.fields[1].lower()
    return low in ("barrier", "ibarrier") or (
        low not in _SENDS and low != "sendrecv" and low not in _IGNORED
        and not low.startswith(_IGNORED_PREFIXES) and collectives.canonical(low) is not None)


#: Share of a phase's relays (a blocking receive, then a send) that must go one way in
#: rank order -- from a lower rank to a higher, or from a higher to a lower -- for its
#: pipeline to be a sweep.
SWEEP_SHARE = 0.9
#: Relays per small blocking-received message a phase needs for those messages to be a
#: pipeline (a chain: ranks pass on what they receive); fewer, and they are ordinary
#: messages.
RELAY_SHARE = 0.5


def _is_sweep(relays: Sequence[int], messages: int) -> bool:
    """Whether a phase's ``messages`` small blocking-received messages, with its
    ``relays`` [forward, backward, other] (:func:`_receive_kinds`), are a wavefront in
    rank order (:func:`import_ti_phases`)."""
    forward, backward, other = relays
    one_way = forward + backward
    return (one_way + other >= RELAY_SHARE * messages and one_way > 0
            and one_way >= SWEEP_SHARE * (one_way + other))


def _source(line: _Line, i: int, n: int) -> int | None:
    """The rank in field i of a receive or wait line, None when there is none (a
    receive the importer cannot match is left out of the matching, not an error: the
    volumes come from the senders' lines)."""
    try:
        return line.rank_at(i, "source", n)
    except TraceError:
        return None


def _receive_kinds(lines: Sequence[tuple[int, _Line]], n: int
                   ) -> tuple[dict[tuple[int, int, int], list[bool]],
                              dict[int, list[int]]]:
    """Per (phase, source, receiver), in order, whether each receive was *blocking*:
    a ``recv``, or an ``irecv`` the receiver waited for before it sent anything; and
    per phase the relays (a send after a blocking receive) counted by direction in rank
    order [forward, backward, other].  Phases are numbered as in
    :func:`import_ti_phases` (2k: the point-to-point messages before collective k).
    O(lines + Σ pending receives)."""
    count = np.zeros(n, dtype=np.int64)
    kinds: dict[tuple[int, int, int], list[bool]] = {}
    relays: dict[int, list[int]] = {}
    pending: dict[int, list[tuple[int, list[bool], int]]] = {}
    last_src: dict[int, int | None] = {}
    for rank, line in lines:
        low = line.fields[1].lower()
        phase = 2 * int(count[rank])
        if _is_collective(line):
            count[rank] += 1
            pending[rank] = []
            last_src[rank] = None
            continue
        if low in ("recv", "irecv"):
            src = _source(line, 2, n)
            if src is None:
                continue
            queue = kinds.setdefault((phase, src, rank), [])
            queue.append(low == "recv")
            if low == "recv":
                last_src[rank] = src
            else:
                pending.setdefault(rank, []).append((src, queue, len(queue) - 1))
        elif low == "sendrecv":
            src = _source(line, 5, n)
            if src is not None:
                kinds.setdefault((phase, src, rank), []).append(False)
            pending[rank] = []
        elif low in _SENDS:
            pending[rank] = []  # receives still open overlap this send: not blocking
            src = last_src.get(rank)
            if src is not None and line.num(4, "count") * line.dt(5) <= PIPELINE_BYTES:
                dst = line.rank_at(2, "destination", n)
                way = 0 if src < rank < dst else 1 if src > rank > dst else 2
                relays.setdefault(phase, [0, 0, 0])[way] += 1
        elif low == "wait" and len(line.fields) >= 3:
            src = _source(line, 2, n)
            open_ = pending.get(rank, [])
            for i, (s, queue, k) in enumerate(open_):
                if s == src:
                    queue[k] = True
                    last_src[rank] = src
                    del open_[i]
                    break
        elif low.startswith("wait"):  # waitall/waitany without arguments: all done
            for s, queue, k in pending.get(rank, []):
                queue[k] = True
                last_src[rank] = s
            pending[rank] = []
    return kinds, relays


#: :func:`import_ti_phases`'s kinds of a phase's messages: ordinary, a sweep, and the
#: exchange rounds (_ROUND + the round's number)
_ORDINARY, _SWEEP, _ROUND = 0, 1, 2


def _events(lines: Sequence[tuple[int, _Line]], n: int
            ) -> tuple[list[list[tuple]], list[list[int]]]:
    """Per rank its point-to-point events for :func:`ti_rounds.exchange_rounds`, and
    per rank the line index of each of its send events, in order.  O(lines)."""
    events: list[list[tuple]] = [[] for _ in range(n)]
    sends: list[list[int]] = [[] for _ in range(n)]
    for i, (rank, line) in enumerate(lines):
        low = line.fields[1].lower()
        if _is_collective(line):
            events[rank].append(("collective",))
        elif low in _SENDS:
            events[rank].append(("send", line.rank_at(2, "destination", n)))
            sends[rank].append(i)
        elif low == "sendrecv":
            src = _source(line, 5, n)
            dst = line.rank_at(3, "destination", n)
            events[rank].append(("sendrecv", dst, src) if src is not None else ("send", dst))
            sends[rank].append(i)
        elif low in ("recv", "irecv"):
            src = _source(line, 2, n)
            if src is not None:
                events[rank].append((low, src))
        elif low == "wait" and len(line.fields) >= 3:
            src = _source(line, 2, n)
            if src is not None:
                events[rank].append(("wait", src))
        elif low.startswith("wait"):
            events[rank].append(("waitall",))
    return events, sends


def _split_rounds(by_phase: dict[tuple[int, int], list[Edges]],
                  p2p: Sequence[tuple[int, int, Edges, bool]],
                  lines: Sequence[tuple[int, _Line]], n: int) -> None:
    """Move the point-to-point messages of ``by_phase`` outside its sweeps into
    exchange rounds (kind _ROUND + round, :mod:`slurm_plugin.profiles.ti_rounds`) when
    every point-to-point message of the trace is at most :data:`PIPELINE_BYTES`;
    unchanged otherwise, or when the rounds cannot be aligned.  O(lines)."""
    if not p2p or max(float(e[2].max()) for _, _, e, _ in p2p) > PIPELINE_BYTES:
        return
    events, sends = _events(lines, n)
    rounds = exchange_rounds(events)
    if rounds is None:
        return
    round_of = {i: c for per_rank, idx in zip(rounds, sends, strict=True)
                for i, c in zip(idx, per_rank, strict=True)}
    sweeps = {phase for phase, kind in by_phase if kind == _SWEEP}
    for key in [k for k in by_phase if k[1] == _ORDINARY and k[0] % 2 == 0]:
        del by_phase[key]  # every message in them is in p2p (the rest carry none)
    for phase, i, e, pipelined in p2p:
        if not (pipelined and phase in sweeps):
            by_phase.setdefault((phase, _ROUND + round_of[i]), []).append(e)


def import_ti_phases(paths: Sequence[str | Path],
                     progress: Callable[[int, int], None] | None = None) -> PhasedGraph:
    """The traces as :func:`import_ti`'s graph carrying phases split at every
    collective call (barriers included).

    Each rank's lines are taken in order; the point-to-point messages a rank sends
    between its (k-1)-th and k-th collective call belong to phase "p2p k", the
    messages of its k-th collective to phase "<op> k" (every rank must call the same
    number of collectives: the TI format does not name communicators, so, as for the
    expansion, all are taken as MPI_COMM_WORLD's).  Phases without volume are dropped;
    every phase synchronises all ranks (a collective is a barrier in the model), repeat
    1.  The total is :func:`import_ti`'s graph.  A trace of I iterations gives O(I x
    collectives per iteration) phases: merging the repeats is not done.

    **Pipelines.**  A message of at most :data:`PIPELINE_BYTES` that its receiver
    takes blocking (``recv``, or ``irecv`` then ``wait`` before the receiver's next
    send; receives matched to sends in order per source and receiver) is latency-bound;
    where the phase's ranks pass such messages on in rank order (at least
    :data:`RELAY_SHARE` relays -- a send after a blocking receive -- per such message,
    at least :data:`SWEEP_SHARE` of them from a lower-numbered rank to a higher or from
    a higher to a lower: NPB LU's SSOR wavefront, forward then back) they are a
    wavefront: they go to phase "p2p k sweep" with :attr:`~mapper.model.phased_graph.Phase.pace`
    ``"sweep"`` (without it NPB LU's imported trace got placements slower than block:
    bench/README.md, "Traced NAS codes").  Chains in another order (BT's and SP's line
    solves round the multi-partition's cells) stay ordinary messages: marked
    ``"stages"``, BT's trace got a slower placement that kept every link, its J and the
    stages' pace, where without the mark it gets the faster grid's boxes.  Codes that post their
    receives, send, then wait (halo exchanges: HPCG, LULESH) have no pipelines.

    **Exchange rounds.**  When every point-to-point message of the trace is at most
    :data:`PIPELINE_BYTES` (NPB MG at 512 ranks, HPCG), its messages outside sweeps are
    split further into rounds numbered across ranks by logical clocks
    (:func:`slurm_plugin.profiles.ti_rounds.exchange_rounds`): phase "p2p k round j"
    with :attr:`~mapper.model.phased_graph.Phase.pace` ``"rounds"``, which the never-worse rule
    times by their farthest messages (:func:`mapper.objectives.phase_time.round_latency`).
    Measured: NPB MG's trace at 512 ranks got a placement applied that ran 1.04-1.05x block's
    time on the 4:1 trees without its rounds, 0.97-0.98 with them.  A trace the
    clocks cannot follow to its end (a receive no send matches) keeps its phases as
    above.
    O(lines + messages + Σ_p m_p log m_p)."""
    files, lines, n = _read_all(paths, progress)
    kinds, relays = _receive_kinds(lines, n)
    count = np.zeros(n, dtype=np.int64)
    first_op: dict[int, str] = {}
    by_phase: dict[tuple[int, int], list[Edges]] = {}   # (phase, _ORDINARY|_SWEEP)
    p2p: list[tuple[int, int, Edges, bool]] = []   # (phase, line, edges, pipelined)
    parts = []
    for i, (rank, line) in enumerate(lines):
        e = expand_line(line, rank, n)
        parts.append(e)
        if _is_collective(line):
            k = int(count[rank])
            op = line.fields[1].lower()
            if first_op.setdefault(k, op) != op:
                raise CollectiveMismatch(
                    f"{line.where}: rank {rank}'s collective call {k + 1} is {op}, another "
                    f"rank's is {first_op[k]} (calls on other communicators cannot be split "
                    f"into phases)")
            by_phase.setdefault((2 * k + 1, _ORDINARY), []).append(e)
            count[rank] += 1
            continue
        phase = 2 * int(count[rank])
        low = line.fields[1].lower()
        pipelined = False
        if (low in _SENDS or low == "sendrecv") and len(e[0]):
            queue = kinds.get((phase, rank, int(e[1][0])))
            blocking = queue.pop(0) if queue else False
            pipelined = blocking and float(e[2][0]) <= PIPELINE_BYTES
            p2p.append((phase, i, e, pipelined))
        by_phase.setdefault((phase, _SWEEP if pipelined else _ORDINARY), []).append(e)
    if count.min() != count.max():
        r = int(np.argmin(count))
        raise CollectiveMismatch(f"rank {r} calls {count[r]} collectives, rank "
                                 f"{int(np.argmax(count))} {count.max()}: cannot split "
                                 f"phases at collective calls")
    source = f"SMPI TI trace {files[0]}"
    total = _graph(parts, n, source)
    for phase, kind in list(by_phase):
        if kind == _SWEEP and not _is_sweep(relays.get(phase, [0, 0, 0]),
                                            sum(len(e[0]) for e in by_phase[phase, kind])):
            by_phase.setdefault((phase, _ORDINARY), []).extend(by_phase.pop((phase, kind)))
    _split_rounds(by_phase, p2p, lines, n)
    phases = []
    for phase, kind in sorted(by_phase):
        g = _graph(by_phase[phase, kind], n, f"{source} phase {len(phases)}")
        if g.m == 0:
            continue
        name = (f"p2p {phase // 2}" if phase % 2 == 0
                else f"{first_op[phase // 2]} {phase // 2}")
        pace = ""
        if kind == _SWEEP:
            name, pace = f"{name} sweep", "sweep"
        elif kind >= _ROUND:
            name, pace = f"{name} round {kind - _ROUND}", "rounds"
        phases.append(make_phase(g, name=name, pace=pace))
    if not phases:
        raise TraceError(f"{files[0]}: no messages to split into phases")
    return with_phases(total, phases)
