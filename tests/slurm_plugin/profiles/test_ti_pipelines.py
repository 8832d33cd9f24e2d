"""Latency-bound wavefronts found in SMPI TI traces (slurm_plugin.profiles.smpi_ti):
small messages received blocking and passed on in rank order (NPB LU's SSOR) become a
phase of pace "sweep"; chains in another order (BT's line solves) and posted receives
(halos) stay ordinary messages; the store keeps the pace (``paces``).  The traces are
written here line by line as SimGrid 3.32 writes them; the expected volumes are
counted from the same loops."""

from __future__ import annotations

import numpy as np
import pytest

from mapper.model.phased_graph import PhasedGraph
from mapper.objectives.phase_time import latency_pace
from slurm_plugin.commands.cli import main
from slurm_plugin.profiles.smpi_ti import PIPELINE_BYTES, import_ti, import_ti_phases
from slurm_plugin.profiles.store import ProfileError, ProfileStore

SMALL = 40      # doubles: 320 bytes, LU's wavefront message
BULK = 5120     # doubles: 40 KiB, LU's exchange_3 message


def _write(tmp_path, lines: dict[int, list[str]]):
    files = []
    for r, body in lines.items():
        p = tmp_path / f"t_files/1_rank-{r + 1}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(f"{r} {x}\n" for x in ["init", *body, "finalize"]))
        files.append(p)
    index = tmp_path / "t"
    index.write_text("".join(f"t_files/{p.name}\n" for p in files))
    return index


def _grid(q: int):
    """Neighbours on a q x q grid in row-major rank order: (west, north), (east, south)."""
    def lower(r):
        return [x for x in (r - 1 if r % q else None, r - q if r >= q else None)
                if x is not None]

    def higher(r):
        return [x for x in (r + 1 if r % q < q - 1 else None,
                            r + q if r + q < q * q else None) if x is not None]
    return lower, higher


def _wavefront(q: int, iterations: int, planes: int = 3) -> dict[int, list[str]]:
    """LU's pattern: per iteration and k-plane a forward sweep (blocking receives from
    the lower neighbours, then sends to the higher), the backward sweep, then a bulk
    halo (irecv all, send all, wait all), then an allreduce."""
    lower, higher = _grid(q)
    out: dict[int, list[str]] = {}
    for r in range(q * q):
        lines = []
        for _ in range(iterations):
            for _k in range(planes):
                lines += [f"recv {p} 1 {SMALL} 0" for p in lower(r)]
                lines += [f"send {p} 1 {SMALL} 0" for p in higher(r)]
            for _k in range(planes):
                lines += [f"recv {p} 2 {SMALL} 0" for p in higher(r)]
                lines += [f"send {p} 2 {SMALL} 0" for p in lower(r)]
            nb = lower(r) + higher(r)
            lines += [f"irecv {p} 3 {BULK} 0" for p in nb]
            lines += [f"send {p} 3 {BULK} 0" for p in nb]
            lines += [f"wait {p} {r} 3" for p in nb]
            lines.append("allreduce 1 1 0")
        out[r] = lines
    return out


def _paced(g: PhasedGraph) -> list[tuple[str, str, float]]:
    """The pipelines (exchange rounds, which a trace of small messages also has, are
    test_ti_rounds' subject)."""
    return [(p.name, p.pace, p.graph.total_volume * p.repeat) for p in g.phases
            if p.pace in ("sweep", "stages")]


def test_wavefront_is_a_sweep_and_the_halo_is_not(tmp_path):
    q, iterations, planes = 4, 2, 3
    g = import_ti_phases([_write(tmp_path, _wavefront(q, iterations, planes))])
    edges = 2 * q * (q - 1)  # grid edges
    paced = _paced(g)
    assert [p[1] for p in paced] == ["sweep"] * iterations
    # each edge carries one SMALL message per plane and direction of sweep
    assert all(v == pytest.approx(edges * 2 * planes * SMALL * 8) for _, _, v in paced)
    bulk = [p for p in g.phases if p.name.startswith("p2p") and not p.pace]
    assert all(p.graph.total_volume == pytest.approx(edges * 2 * BULK * 8) for p in bulk)
    assert len(bulk) == iterations
    np.testing.assert_allclose(  # the phases add up to the total, as before
        sum(p.repeat * p.graph.to_csr() for p in g.phases).toarray(),
        import_ti([tmp_path / "t"]).to_csr().toarray())


def test_posted_receives_are_no_pipeline(tmp_path):
    # HPCG's and LULESH's halo: receives posted, sends, then waits -- small, but the
    # sends do not wait for anything: no pace
    q = 4
    lower, higher = _grid(q)
    lines = {}
    for r in range(q * q):
        nb = lower(r) + higher(r)
        body = []
        for _ in range(5):
            body += [f"irecv {p} 9 {SMALL} 0" for p in nb]
            body += [f"send {p} 9 {SMALL} 0" for p in nb]
            body += [f"wait {p} {r} 9" for p in nb]
        lines[r] = [*body, "allreduce 1 1 0"]
    g = import_ti_phases([_write(tmp_path, lines)])
    assert _paced(g) == []


def test_waited_receives_passed_on_count_and_only_rank_order_makes_a_sweep(tmp_path):
    # irecv, then wait before sending counts as a blocking receive.  Passed on along a
    # line 0 -> 1 -> ... -> n-1 it is a sweep; round a ring (BT's solves: rank 0 and
    # n-1 turn the chain round, 2 of 4 relays against rank order) it is not: marked
    # as stages, BT's traced placement ran 1.03-1.18x block's (bench/README.md)
    def chain(n: int, ring: bool) -> dict[int, list[str]]:
        lines = {}
        for r in range(n):
            pred, succ = (r - 1) % n, (r + 1) % n
            body = []
            for cell in range(6):
                if ring or r > 0:
                    body += [f"irecv {pred} {cell} 405 0", f"wait {pred} {r} {cell}"]
                if ring or r < n - 1:
                    body += [f"isend {succ} {cell} 405 0", f"wait {r} {succ} {cell}"]
            lines[r] = [*body, "barrier"]
        return lines
    line = import_ti_phases([_write(tmp_path / "line", chain(4, False))])
    assert [(name, pace) for name, pace, _ in _paced(line)] == [("p2p 0 sweep", "sweep")]
    ring = import_ti_phases([_write(tmp_path / "ring", chain(4, True))])
    assert _paced(ring) == []
    assert ring.total_volume == pytest.approx(4 * 6 * 405 * 8)


def test_large_or_unrelayed_blocking_messages_are_no_pipeline(tmp_path):
    big = PIPELINE_BYTES // 8 + 1  # doubles: just above the limit
    lower, higher = _grid(3)
    lines = {}
    for r in range(9):
        body = []
        for _ in range(3):
            body += [f"recv {p} 1 {big} 0" for p in lower(r)]
            body += [f"send {p} 1 {big} 0" for p in higher(r)]
        lines[r] = [*body, "barrier"]
    assert _paced(import_ti_phases([_write(tmp_path / "a", lines)])) == []
    # small and blocking, but nobody passes anything on: every rank sends to rank 0
    lines = {0: [f"recv {p} 1 {SMALL} 0" for p in range(1, 4)] + ["barrier"]}
    lines.update({r: [f"send 0 1 {SMALL} 0", "barrier"] for r in range(1, 4)})
    assert _paced(import_ti_phases([_write(tmp_path / "b", lines)])) == []


def test_import_stores_the_pipelines_pace_and_the_store_reads_it(tmp_path, capsys):
    q = 4
    index = _write(tmp_path, _wavefront(q, 2))
    store = tmp_path / "store"
    assert main(["profile", "import", "--format", "smpi-ti", str(index), "--name", "lu",
                 "--store", str(store)]) == 0  # no --phases: pipelines force them
    out = capsys.readouterr().out
    assert "latency-bound wavefronts" in out
    toml = (store / "lu.toml").read_text()
    assert "paces = [" in toml
    g = ProfileStore([store]).load("lu", q * q)
    assert isinstance(g, PhasedGraph)
    sweeps = [k for k, p in enumerate(g.phases) if p.pace == "sweep"]
    assert sweeps
    assert main(["profile", "show", "lu", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert f"phases       {len(g.phases)}; latency-bound: " in shown
    assert shown.count("(sweep)") == len(sweeps) and f"lu.p{sweeps[0]}.mtx (sweep)" in shown
    # strips of 4 ranks (block) against 2x2 boxes on nodes of 4 cores: the boxes'
    # corner ranks pass the wavefront on across two node links
    from mapper import Hierarchy
    machine = Hierarchy.homogeneous([4, 2, 2], [1, 10, 100])
    boxes = np.array([(r // q // 2) * 8 + (r % q // 2) * 4 + (r // q % 2) * 2 + r % 2
                      for r in range(q * q)])
    assert latency_pace(g, machine, boxes, [0, 1]) > \
        latency_pace(g, machine, np.arange(q * q), [0, 1])
    # a halo without pipelines keeps the plain profile it had (of bulk messages: a
    # halo of small ones has exchange rounds, test_ti_rounds)
    lines = {r: [f"send {(r + 1) % 4} 1 {BULK} 0", f"irecv {(r - 1) % 4} 1 {BULK} 0",
                 f"wait {(r - 1) % 4} {r} 1"] for r in range(4)}
    assert main(["profile", "import", "--format", "smpi-ti",
                 str(_write(tmp_path / "h", lines)), "--name", "h", "--store",
                 str(store)]) == 0
    assert "phases" not in (store / "h.toml").read_text()


@pytest.mark.parametrize("paces,message", [
    ('["sweep"]', r"a\.toml:4: paces: 1 values for 2 phases"),
    ('["", "wave"]', r"a\.toml:4: paces\[1\]: 'wave' is not one of"),
])
def test_bad_paces_name_the_line(tmp_path, paces, message):
    store = tmp_path / "store"
    store.mkdir()
    for f in ("a.mtx", "a.p0.mtx", "a.p1.mtx"):
        (store / f).write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 1\n"
                               if f == "a.mtx" else
                               "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 0.5\n")
    (store / "a.toml").write_text(f'ranks = 2\nfile = "a.mtx"\n'
                                  f'phases = ["a.p0.mtx", "a.p1.mtx"]\npaces = {paces}\n')
    with pytest.raises(ProfileError, match=message):
        ProfileStore([store]).load("a", 2)


def test_sendrecv_before_a_chain_keeps_receives_matched(tmp_path):
    # ranks 0 and 1 swap with MPI_Sendrecv, then a chain runs 0 -> 1 -> 2 -> 3: each
    # chain message is matched to its own blocking receive, 0 -> 1 included
    lines = {0: ["sendRecv 4 1 4 1 0 0", *[f"send 1 7 {SMALL} 0"] * 3],
             1: ["sendRecv 4 0 4 0 0 0", *[f"recv 0 7 {SMALL} 0", f"send 2 7 {SMALL} 0"] * 3],
             2: [f"recv 1 7 {SMALL} 0", f"send 3 7 {SMALL} 0"] * 3,
             3: [f"recv 2 7 {SMALL} 0"] * 3}
    g = import_ti_phases([_write(tmp_path, {r: [*b, "barrier"] for r, b in lines.items()})])
    (pipe,) = [p for p in g.phases if p.pace == "sweep"]
    u, v, w = pipe.graph.edges()
    assert sorted(zip(u.tolist(), v.tolist(), strict=True)) == [(0, 1), (1, 2), (2, 3)]
    np.testing.assert_allclose(w, 3 * SMALL * 8)


def test_unmatchable_receives_are_left_out_not_errors(tmp_path):
    # a receive whose source is no rank (or missing) cannot be matched: the import
    # goes on, counting the senders' lines as always
    lines = {0: [f"send 1 1 {SMALL} 0", "barrier"],
             1: [f"recv -1 1 {SMALL} 0", "irecv", "wait", "barrier"]}
    g = import_ti_phases([_write(tmp_path, lines)])
    assert g.total_volume == pytest.approx(SMALL * 8)
    assert _paced(g) == []
