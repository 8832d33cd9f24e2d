"""Import Open MPI's ``pml_monitoring`` output as a communication profile.

Run the application once with::

    mpirun --mca pml_monitoring_enable 2 --mca pml_monitoring_enable_output 3 \\
           --mca pml_monitoring_filename PREFIX ./app

Open MPI 4.1 then writes ``PREFIX.<rank>.prof`` per rank.  Point-to-point lines are
``KIND<TAB>src<TAB>dst<TAB>N bytes<TAB>M msgs sent<TAB>histogram`` where KIND is ``E``
(the application's own messages), ``I`` (messages the library sends for collectives
and one-sided operations) or ``C``; ``D``/``O2A``/``A2O``/``A2A`` lines summarize
collectives per communicator and are not pairwise, so they are skipped.  The bytes
each rank sent become directed traffic, symmetrized into an undirected graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from mapper import CommGraph
from mapper.errors import RankmapError


class MonitoringError(RankmapError, ValueError):
    """Monitoring output that is missing or malformed; names the file and line."""


_LINE = re.compile(r"^([EIC])\t(\d+)\t(\d+)\t(\d+) bytes\t(\d+) msgs sent")
DEFAULT_KINDS = ("E", "I", "C")


def find_files(prefix: str | Path) -> list[Path]:
    """``PREFIX.<rank>.prof`` files in rank order."""
    prefix = Path(prefix)
    found = []
    for p in prefix.parent.glob(prefix.name + ".*.prof"):
        middle = p.name[len(prefix.name) + 1:-len(".prof")]
        if middle.isdigit():
            found.append((int(middle), p))
    if not found:
        raise MonitoringError(f"no monitoring files {prefix}.<rank>.prof")
    found.sort()
    ranks = [r for r, _ in found]
    if ranks != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        raise MonitoringError(f"{prefix}: missing files for ranks {missing[:10]}")
    return [p for _, p in found]


def parse_prof(text: str, source: str, kinds: Iterable[str] = DEFAULT_KINDS
               ) -> list[tuple[int, int, float]]:
    """(src, dst, bytes) records of one ``.prof`` file."""
    want = set(kinds)
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#") or line.split("\t", 1)[0] in (
                "D", "O2A", "A2O", "A2A"):
            continue
        m = _LINE.match(line)
        if not m:
            raise MonitoringError(f"{source}:{no}: not a monitoring line: {line[:80]!r}")
        if m.group(1) in want:
            out.append((int(m.group(2)), int(m.group(3)), float(m.group(4))))
    return out


def import_monitoring(prefix: str | Path, kinds: Iterable[str] = DEFAULT_KINDS,
                      progress: Callable[[int, int], None] | None = None) -> CommGraph:
    """Read all ranks' files into one graph; ``progress(done, total)`` after each file."""
    files = find_files(prefix)
    records: list[tuple[int, int, float]] = []
    for i, path in enumerate(files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MonitoringError(f"{path}: cannot read: {exc}") from None
        recs = parse_prof(text, str(path), kinds)
        for src, _, _ in recs:
            if src != i:
                raise MonitoringError(f"{path}: lists messages sent by rank {src}, "
                                      f"expected rank {i}")
        records.extend(recs)
        if progress:
            progress(i + 1, len(files))
    n = len(files)
    if not records:
        return CommGraph.from_edges([], [], [], n=n, source=str(prefix))
    arr = np.array(records)
    src, dst, w = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2]
    if dst.max() >= n:
        raise MonitoringError(f"{prefix}: messages to rank {int(dst.max())} but only {n} "
                              f"rank files")
    keep = (src != dst) & (w > 0)
    return CommGraph.from_edges(src[keep], dst[keep], w[keep], n=n, source=str(prefix))
