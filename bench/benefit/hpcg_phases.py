#!/usr/bin/env python3
"""Per-phase traffic of HPCG 3.1 under the placements of a ``run_benefit.py`` case.

Reads HPCG's SMPI time-independent trace (``smpirun -trace-ti``: the index file, one
per-rank file a line) and splits it into its phases: halo exchanges (a run of
``irecv``/``send``/``wait`` lines; HPCG's ExchangeHalo posts every receive, sends to
every neighbour, then waits), classified by multigrid level from their largest
message (a face: (16/2^L)^2 doubles for local size 16), and the allreduces (HPCG's dot
products and norms, 8 bytes).  For every placement of the case (hostfiles and
results.json in the case directory) it prints, per level: how many exchanges a rank
makes, messages and bytes of one exchange, and for one exchange the busiest directed
link of each network level (messages, bytes) and the farthest neighbour any rank has
(0 same node, 1 same leaf, 2 through the spine or a middle switch, 3 through the top);
then the allreduce, as the profile expands it (recursive doubling) and as SimGrid's
default selector runs it (a linear reduce to rank 0, then a binomial bcast from it), by
the distance of the farthest pair of each step.

Usage: ``python3 bench/benefit/hpcg_phases.py CASE TRACE`` (CASE: e.g.
/tmp/rankmap-benefit/tree3-hpcg-64; TRACE: the index file of a trace at that rank count,
kept with ``run_benefit.py --keep-trace``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cg_phases import switch_tree  # noqa: E402

DOUBLE = 8


def read_exchanges(index: Path) -> tuple[dict[int, list[tuple[int, int, int]]],
                                         Counter, Counter]:
    """(level → one exchange's messages (src, dst, bytes) of every rank, exchanges per
    rank per level, allreduces per rank by bytes), from rank 0 … n-1's files.  Every rank
    makes the same sequence of exchanges (checked by count), so one exchange per level
    stands for all."""
    files = [Path(x) if Path(x).is_absolute() else index.parent / x
             for x in index.read_text().split()]
    first: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    counts: dict[int, Counter] = {}
    allreduce: Counter = Counter()
    for rank, f in enumerate(files):
        per = Counter()
        block: list[tuple[int, int]] = []
        firsts: dict[int, list[tuple[int, int]]] = {}

        def close(block=block, per=per, firsts=firsts) -> None:
            if block:
                face = max(b for _, b in block)
                level = round(np.log2(16 * 16 * DOUBLE / face) / 2)
                per[level] += 1
                firsts.setdefault(level, list(block))
                block.clear()

        last = ""
        for line in f.read_text().splitlines():
            w = line.split()
            op = w[1]
            if op == "irecv" and last == "wait":  # the next exchange's first receive
                close()
            if op == "send":
                block.append((int(w[2]), int(w[4]) * DOUBLE))
            elif op not in ("irecv", "wait"):
                close()
                if op == "allreduce" and rank == 0:
                    allreduce[int(w[2]) * DOUBLE] += 1
            last = op
        close()
        counts[rank] = per
        for level, msgs in firsts.items():
            first[level].extend((rank, dst, b) for dst, b in msgs)
    per_level = Counter()
    for c in counts.values():
        for level, k in c.items():
            per_level[level] = max(per_level[level], k)
    return dict(first), per_level, allreduce


def groups(node: np.ndarray, leaf_of: dict, mid_of: dict) -> list[tuple[str, np.ndarray]]:
    leaf = np.array([leaf_of[x] for x in node])
    out = [("node", node), ("leaf", leaf)]
    if mid_of:
        out.append(("mid", np.array([mid_of[x] for x in leaf])))
    return out


def distance(a: int, b: int, levels: list[tuple[str, np.ndarray]]) -> int:
    """0 same node, 1 same leaf, 2 same middle switch (or spine), 3 through the top."""
    for d, (_, g) in enumerate(levels):
        if g[a] == g[b]:
            return d
    return len(levels)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", type=Path)
    ap.add_argument("trace", type=Path)
    args = ap.parse_args()
    rec = json.loads((args.case / "results.json").read_text())
    leaf_of, mid_of = switch_tree(args.case / "topology.conf")
    first, per_level, allreduce = read_exchanges(args.trace)
    n = rec["ranks"]
    print(f"{n} ranks; exchanges per rank by level: {dict(sorted(per_level.items()))}; "
          f"allreduces (rank 0) by bytes: {dict(allreduce)}")
    for level in sorted(first):
        msgs = first[level]
        sizes = Counter(b for _, _, b in msgs)
        print(f"level {level}: {len(msgs)} messages, {sum(sizes.elements())} bytes per "
              f"exchange; sizes {dict(sorted(sizes.items()))}")
    seen: dict[bytes, str] = {}
    for p in rec["placements"]:
        hosts = Path(p["hostfile"]).read_text().split()
        node = np.array([int(h.lstrip("h")) for h in hosts])
        if node.tobytes() in seen:
            print(f"\n{p['name']}: same placement as {seen[node.tobytes()]}")
            continue
        seen[node.tobytes()] = p["name"]
        lv = groups(node, leaf_of, mid_of)
        ratio = p.get("ratio_to_default")
        print(f"\n{p['name']} (simulated {p['seconds']}, ratio "
              f"{'-' if ratio is None else f'{ratio:.3f}'})")
        print("| level | exchanges | " + " | ".join(
            f"busiest {name} link: msgs / bytes" for name, _ in lv) +
            " | ranks by farthest neighbour (" + "/".join(map(str, range(len(lv) + 1))) +
            ") |")
        for level in sorted(first):
            src = np.array([s for s, _, _ in first[level]])
            dst = np.array([d for _, d, _ in first[level]])
            nb = np.array([b for _, _, b in first[level]], dtype=float)
            cells = []
            for _, g in lv:
                cross = g[src] != g[dst]
                if not cross.any():
                    cells.append("0 / 0")
                    continue
                best = (0, 0.0)
                for side in (g[src][cross], g[dst][cross]):  # leaving, entering
                    m = np.bincount(side)
                    b = np.bincount(side, weights=nb[cross])
                    k = int(np.argmax(b))
                    best = max(best, (int(m[k]), float(b[k])), key=lambda x: x[1])
                cells.append(f"{best[0]} / {best[1]:.0f}")
            far = Counter()
            for r in range(n):
                far[max((distance(r, d, lv) for s, d, _ in first[level] if s == r),
                        default=0)] += 1
            print(f"| {level} | {per_level[level]} | " + " | ".join(cells) + " | " +
                  "/".join(str(far[d]) for d in range(len(lv) + 1)) + " |")
        steps = []
        k = 1
        while k < n:
            steps.append(max(distance(r, r ^ k, lv) for r in range(n) if r ^ k < n))
            k <<= 1
        print(f"allreduce as the profile expands it (recursive doubling, partner r xor "
              f"2^k): farthest pair per step {steps}")
        # what SMPI runs (SimGrid's default selector): reduce = every rank sends to rank 0
        # (non-blocking, linear), then bcast__binomial_tree from rank 0 (mask from the
        # highest down: rank r, a multiple of 2·mask, sends to r + mask)
        into0 = Counter(distance(r, 0, lv) for r in range(1, n))
        bsteps = []
        mask = 1 << (n - 1).bit_length() - 1
        while mask:
            bsteps.append(max(distance(r, r + mask, lv) for r in range(0, n, 2 * mask)
                              if r + mask < n))
            mask >>= 1
        lat = [0.1] + [2.0 + 1.0 * (d - 1) for d in range(1, len(lv) + 1)]
        print(f"allreduce as SMPI runs it: reduce, ranks by distance to rank 0 "
              f"{dict(sorted(into0.items()))} (farthest {max(into0)}); binomial bcast from "
              f"0, farthest pair per step {bsteps}; one-way latency sum of the chain "
              f"{lat[max(into0)] + sum(lat[d] for d in bsteps):.1f} us (0.1 us same node, "
              f"2 us a leaf, +1 us a switch level above; before SMPI's latency factors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
