"""Read what librankmap_record wrote (slurm_plugin/record/rankmap_record.c) and merge it
into one communication graph.

A recording is a directory holding ``rank.<R>`` for every world rank R of the run, each
written by that rank at MPI_Finalize (the format is in the C file's comment: a
versioned header, the rank's point-to-point sends per destination world rank, the
communicators it used as member lists, and its collective calls, aggregated, not
expanded).  The merge sums the point-to-point rows and expands every collective with
the table the SMPI importer uses (:func:`slurm_plugin.profiles.collectives.expand`),
over the communicator's real members, mapped back to world ranks.  Messages are
counted once, by their sender; the graph is undirected (both directions summed), the
directed parts are kept in :class:`Recording` for inspection.

A recording with a rank missing (the rank died, the job was killed, the file is still
being written: ``.rank.R.tmp``) or with a rank that stopped recording (its file's
``stopped`` line says why: no memory) is an :class:`IncompleteRecording`, never a
smaller profile.  Files are read as profiles are: regular files (no symbolic link), at most
``max_file_bytes`` each; every count in a file is checked against its header before
anything is allocated, and errors name the file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mapper import CommGraph
from mapper.errors import RankmapError
from mapper.io.regular_file import FileTooLarge, NotARegularFile, read_regular_file

from . import collectives

FORMAT = "rankmap-record"
VERSION = 2
#: versions read: 1 lacks the optional ``stopped`` line
VERSIONS = ("1", "2")
#: default bound of one rank's file
MAX_FILE_BYTES = 64 << 20
#: default bound of a recording's world size
MAX_RANKS = 1 << 20
_RANK_FILE = re.compile(r"^rank\.(\d+)$")
_TMP_FILE = re.compile(r"^\.rank\.(\d+)\.tmp$")


class RecordingError(RankmapError, ValueError):
    """A recording that cannot be read; the message names the file and line."""


class IncompleteRecording(RecordingError):
    """A recording that lacks ranks (or holds none): not a profile of the run."""


@dataclass
class RankRecord:
    """One rank's file, checked."""

    rank: int
    size: int
    abi: str
    mpi: str
    memory: int
    #: destination world ranks, bytes, messages (point-to-point sends)
    p2p: tuple[np.ndarray, np.ndarray, np.ndarray]
    #: communicator id -> member world ranks in local rank order (None: MPI_COMM_WORLD's)
    comms: dict[int, np.ndarray | None]
    #: (op, comm id, root or None, amount: bytes over all calls, one number or a row)
    coll: list[tuple[str, int, int | None, float | np.ndarray]] = field(default_factory=list)
    #: (p2p bytes, p2p messages, collective calls) the recorder could not keep
    dropped: tuple[int, int, int] = (0, 0, 0)
    #: why the rank stopped recording before MPI_Finalize (its counts are partial)
    stopped: str | None = None


@dataclass
class Recording:
    """The merged recording: the graph, and its directed parts (sender -> receiver)."""

    directory: Path
    size: int
    abi: str
    mpi: str
    p2p: sp.csr_matrix
    collective: sp.csr_matrix
    graph: CommGraph
    #: the largest recorder memory of any rank, bytes
    memory: int
    #: (p2p bytes, p2p messages, collective calls) dropped, summed over the ranks
    dropped: tuple[int, int, int]


class _Lines:
    """The lines of one file, consumed in order; errors carry the file and line."""

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.source, self.no = source, 0

    def fail(self, why: str, no: int | None = None) -> RecordingError:
        return RecordingError(f"{self.source}:{self.no if no is None else no}: {why}")

    def next(self, what: str) -> list[str]:
        if self.no >= len(self.lines):
            raise RecordingError(f"{self.source}:{self.no + 1}: ends before {what} (a file "
                                 f"cut short?)")
        self.no += 1
        return self.lines[self.no - 1].split()

    def keyword(self, key: str, nfields: int | None = 2) -> list[str]:
        f = self.next(f"the '{key}' line")
        if not f or f[0] != key or (nfields is not None and len(f) != nfields):
            raise self.fail(f"expected '{key} ...'" +
                            (f" with {nfields - 1} value(s)" if nfields else "") +
                            f", found {' '.join(f)[:80]!r}")
        return f

    def int_at(self, f: list[str], i: int, what: str, lo: int = 0,
               hi: int | None = None) -> int:
        try:
            v = int(f[i])
        except IndexError:
            raise self.fail(f"missing {what}") from None
        except ValueError:
            raise self.fail(f"{what} {f[i][:40]!r} is not an integer") from None
        if v < lo or (hi is not None and v >= hi):
            raise self.fail(f"{what} {v} is out of range"
                            + (f" [{lo}, {hi})" if hi is not None else f" (below {lo})"))
        return v


def parse_rank_file(text: str, source: str, max_ranks: int = MAX_RANKS) -> RankRecord:
    """One ``rank.<R>`` file's content, checked line by line."""
    ln = _Lines(text, source)
    head = ln.next("the header")
    if head[:1] != [FORMAT] or len(head) != 2:
        raise ln.fail(f"not a {FORMAT} file")
    if head[1] not in VERSIONS:
        raise ln.fail(f"{FORMAT} version {head[1][:20]} (this rankmap reads versions "
                      f"{', '.join(VERSIONS)})")
    abi = ln.keyword("abi")[1]
    if abi not in ("openmpi", "mpich"):
        raise ln.fail(f"unknown abi {abi[:40]!r}")
    mpi_line = ln.keyword("mpi", None)
    mpi = " ".join(mpi_line[1:])
    rank = ln.int_at(ln.keyword("rank"), 1, "rank")
    size = ln.int_at(ln.keyword("size"), 1, "size", 1, max_ranks + 1)
    if rank >= size:
        raise ln.fail(f"rank {rank} of a world of {size}")
    memory = ln.int_at(ln.keyword("memory"), 1, "memory")

    k = ln.int_at(ln.keyword("p2p"), 1, "p2p line count", 0, size + 1)
    dst = np.zeros(k, dtype=np.int64)
    nbytes = np.zeros(k)
    msgs = np.zeros(k, dtype=np.int64)
    for i in range(k):
        f = ln.next(f"p2p line {i + 1} of {k}")
        if len(f) != 3:
            raise ln.fail("expected 'DESTINATION BYTES MESSAGES'")
        dst[i] = ln.int_at(f, 0, "destination", 0, size)
        nbytes[i] = ln.int_at(f, 1, "bytes")
        msgs[i] = ln.int_at(f, 2, "messages")
    if len(np.unique(dst)) != k:
        raise ln.fail("a destination is listed twice in the p2p lines")

    k = ln.int_at(ln.keyword("comms"), 1, "communicator count", 1, 1 << 16)
    comms: dict[int, np.ndarray | None] = {}
    for i in range(k):
        f = ln.next(f"communicator {i + 1} of {k}")
        cid = ln.int_at(f, 0, "communicator id", 0, k)
        if cid in comms:
            raise ln.fail(f"communicator {cid} is listed twice")
        if len(f) == 2 and f[1] == "world":
            comms[cid] = None
            continue
        n = ln.int_at(f, 1, "communicator size", 1, size + 1)
        if len(f) != n + 2:
            raise ln.fail(f"communicator {cid} of {n} members lists {len(f) - 2}")
        try:
            members = np.array(f[2:], dtype=np.int64)
        except ValueError:
            raise ln.fail("member ranks are not integers") from None
        if (members < -1).any() or (members >= size).any():
            raise ln.fail(f"a member is no world rank below {size} (nor -1)")
        if rank not in members:
            raise ln.fail(f"rank {rank} is not a member of its communicator {cid}")
        comms[cid] = members

    coll: list[tuple[str, int, int | None, float | np.ndarray]] = []

    def op_comm_root(f: list[str]) -> tuple[str, int, int | None, int]:
        op = f[0]
        if op not in collectives.RULES:
            raise ln.fail(f"unknown collective {op[:40]!r}")
        cid = ln.int_at(f, 1, "communicator id")
        if cid not in comms:
            raise ln.fail(f"communicator {cid} is not listed")
        n = size if comms[cid] is None else len(comms[cid])
        if f[2] == "-":
            root = None
            if collectives.RULES[op].rooted:
                raise ln.fail(f"{op} needs a root")
        else:
            root = ln.int_at(f, 2, "root", 0, n)
        return op, cid, root, n

    k = ln.int_at(ln.keyword("coll"), 1, "collective line count", 0, 1 << 20)
    for i in range(k):
        f = ln.next(f"collective line {i + 1} of {k}")
        if len(f) != 5:
            raise ln.fail("expected 'OP COMM ROOT BYTES CALLS'")
        op, cid, root, _ = op_comm_root(f)
        coll.append((op, cid, root, float(ln.int_at(f, 3, "bytes") *
                                         ln.int_at(f, 4, "calls"))))
    k = ln.int_at(ln.keyword("vcoll"), 1, "v-collective line count", 0, 1 << 20)
    for i in range(k):
        f = ln.next(f"v-collective line {i + 1} of {k}")
        if len(f) < 4:
            raise ln.fail("expected 'OP COMM ROOT CALLS BYTES...'")
        op, cid, root, n = op_comm_root(f)
        if not collectives.RULES[op].per_member:
            raise ln.fail(f"{op} takes no bytes per member")
        ln.int_at(f, 3, "calls")
        if len(f) != n + 4:
            raise ln.fail(f"{op} on a communicator of {n} lists {len(f) - 4} byte counts")
        try:
            row = np.array(f[4:], dtype=np.int64).astype(float)
        except ValueError:
            raise ln.fail("byte counts are not integers") from None
        if (row < 0).any():
            raise ln.fail("byte counts must not be negative")
        coll.append((op, cid, root, row))
    f = ln.keyword("dropped", 4)
    dropped = (ln.int_at(f, 1, "dropped bytes"), ln.int_at(f, 2, "dropped messages"),
               ln.int_at(f, 3, "dropped collective calls"))
    stopped = None
    if head[1] != "1" and ln.no < len(ln.lines) and ln.lines[ln.no].startswith("stopped"):
        stopped = " ".join(ln.next("the 'stopped' line")[1:])[:300] or "no reason given"
    ln.keyword("end", 1)
    if any(line.strip() for line in ln.lines[ln.no:]):
        raise ln.fail("text after 'end'", ln.no + 1)
    return RankRecord(rank, size, abi, mpi, memory, (dst, nbytes, msgs), comms, coll,
                      dropped, stopped)


def collective_sends(rec: RankRecord) -> tuple[np.ndarray, np.ndarray]:
    """The world destinations and bytes of the messages ``rec``'s rank sends in its
    collectives, expanded by the shared table.  Entries of one (operation,
    communicator, root) are summed first: every rule is linear in its amount."""
    summed: dict[tuple[str, int, int | None], float | np.ndarray] = {}
    for op, cid, root, amount in rec.coll:
        key = (op, cid, root)
        summed[key] = summed.get(key, 0.0) + amount
    dsts, ws = [], []
    for (op, cid, root), amount in summed.items():
        if not np.any(amount):
            continue
        members = rec.comms[cid]
        if members is None:
            local, n = rec.rank, rec.size
        else:
            local, n = int(np.flatnonzero(members == rec.rank)[0]), len(members)
        d, w = collectives.expand(op, local, n, root, amount)
        world = d if members is None else members[d]
        keep = world >= 0  # -1: a member outside this world
        dsts.append(world[keep])
        ws.append(w[keep])
    if not dsts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(dsts), np.concatenate(ws)


def _read(path: Path, max_file_bytes: int) -> str:
    try:
        raw = read_regular_file(path, max_file_bytes, follow_symlinks=False)
    except NotARegularFile as exc:
        raise RecordingError(f"{path}: is {exc.kind}, not a regular file") from None
    except FileTooLarge:
        raise RecordingError(f"{path}: larger than the limit of {max_file_bytes} "
                             f"bytes") from None
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise RecordingError(f"{path}: not a {FORMAT} file (byte {exc.start} is not "
                             f"ASCII)") from None


def read_recording(directory: str | os.PathLike, *, max_file_bytes: int = MAX_FILE_BYTES,
                   max_ranks: int = MAX_RANKS) -> Recording:
    """Read and merge the recording in ``directory``; :class:`IncompleteRecording` when
    a rank's file is missing, :class:`RecordingError` when a file is damaged."""
    directory = Path(directory)
    ranks: dict[int, str] = {}
    partial: list[int] = []
    try:
        with os.scandir(directory) as it:
            for i, entry in enumerate(it):
                if i > max_ranks + 1024:
                    raise RecordingError(f"{directory}: more than {max_ranks} files")
                if m := _RANK_FILE.match(entry.name):
                    ranks[int(m.group(1))] = entry.name
                elif m := _TMP_FILE.match(entry.name):
                    partial.append(int(m.group(1)))
    except OSError as exc:
        raise RecordingError(f"{directory}: cannot list: {exc.strerror or exc}") from None
    if not ranks:
        raise IncompleteRecording(f"{directory}: no rank files (rank.<R>): the program "
                                  f"did not reach MPI_Finalize, or was not recorded")
    first = parse_rank_file(_read(directory / ranks[min(ranks)], max_file_bytes),
                            str(directory / ranks[min(ranks)]), max_ranks)
    size = first.size
    missing = sorted(set(range(size)) - set(ranks))
    if missing:
        why = (f"{len(missing)} of {size} ranks wrote no file (first: "
               f"{', '.join(map(str, missing[:10]))})")
        if set(partial) & set(missing):
            why += "; some were cut off while writing"
        raise IncompleteRecording(f"{directory}: incomplete recording: {why}")
    extra = sorted(r for r in ranks if r >= size)
    if extra:
        raise RecordingError(f"{directory}/{ranks[extra[0]]}: rank {extra[0]} beyond the "
                             f"world of {size} the other files record")
    src, dst, w = [], [], []
    csrc, cdst, cw = [], [], []
    memory = 0
    dropped = np.zeros(3, dtype=np.int64)
    stopped: list[tuple[int, str]] = []
    for r in range(size):
        path = directory / ranks[r]
        rec = first if r == first.rank else parse_rank_file(
            _read(path, max_file_bytes), str(path), max_ranks)
        if rec.rank != r:
            raise RecordingError(f"{path}:4: records rank {rec.rank}, not {r}")
        if rec.size != size:
            raise RecordingError(f"{path}:5: a world of {rec.size} ranks, the others "
                                 f"{size}")
        if (rec.abi, rec.mpi) != (first.abi, first.mpi):
            raise RecordingError(f"{path}: recorded under another MPI ({rec.mpi!r}) than "
                                 f"rank {first.rank} ({first.mpi!r})")
        d, b, _ = rec.p2p
        src.append(np.full(len(d), r))
        dst.append(d)
        w.append(b)
        d, b = collective_sends(rec)
        csrc.append(np.full(len(d), r))
        cdst.append(d)
        cw.append(b)
        memory = max(memory, rec.memory)
        dropped += rec.dropped
        if rec.stopped:
            stopped.append((r, rec.stopped))

    if stopped:
        r, why = stopped[0]
        raise IncompleteRecording(
            f"{directory}: incomplete recording: {len(stopped)} of {size} ranks stopped "
            f"recording before MPI_Finalize (rank {r}: {why})")

    def directed(s, d, x) -> sp.csr_matrix:
        return sp.coo_matrix((np.concatenate(x), (np.concatenate(s), np.concatenate(d))),
                             shape=(size, size)).tocsr()

    p2p, coll = directed(src, dst, w), directed(csrc, cdst, cw)
    total = (p2p + coll).tocoo()
    keep = (total.row != total.col) & (total.data > 0)
    graph = CommGraph.from_edges(total.row[keep], total.col[keep], total.data[keep], n=size,
                                 source=f"recording {directory}")
    return Recording(directory, size, first.abi, first.mpi, p2p, coll, graph, memory,
                     tuple(int(x) for x in dropped))
