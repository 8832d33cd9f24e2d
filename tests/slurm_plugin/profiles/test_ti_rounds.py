"""Exchange rounds found in SMPI TI traces: a trace whose point-to-point messages are
all small (at most ``PIPELINE_BYTES``) has them split into rounds aligned across ranks
by logical clocks (slurm_plugin.profiles.ti_rounds), each a phase of pace "rounds";
ranks that skip rounds (NPB MG's idle ranks at coarse levels) rejoin their neighbours'
round; equal rounds merge with a repeat count that the store keeps (``repeats``).  The
traces are written line by line as SimGrid 3.32 writes them (NPB MG's ``comm3``:
``irecv`` both sides, ``send`` both sides, ``wait`` both); the expected rounds are
counted from the same loops."""

from __future__ import annotations

import numpy as np
import pytest

from mapper.model.machine import Hierarchy
from mapper.model.phased_graph import merge_global_phases
from mapper.objectives.phase_time import round_latency
from slurm_plugin.commands.cli import main
from slurm_plugin.profiles.smpi_ti import PIPELINE_BYTES, import_ti, import_ti_phases
from slurm_plugin.profiles.store import ProfileError, ProfileStore
from slurm_plugin.profiles.ti_rounds import exchange_rounds
from tests.slurm_plugin.profiles.test_ti_pipelines import BULK, _wavefront, _write

FACE = 128   # doubles: 1 KiB, a coarse level's border


def _coords(r: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    x, y, z = dims
    return r % x, (r // x) % y, r // (x * y)


def _neighbour(r: int, dims: tuple[int, int, int], axis: int, step: int) -> int:
    c = list(_coords(r, dims))
    c[axis] = (c[axis] + step) % dims[axis]
    return c[0] + dims[0] * (c[1] + dims[1] * c[2])


def _mg(dims: tuple[int, int, int], iterations: int, levels: int = 2,
        idle: frozenset[int] = frozenset(), face: int = FACE) -> dict[int, list[str]]:
    """MG's border exchange: per iteration and level, one round per axis (irecv from
    both neighbours, send to both, wait for both), then an allreduce; ranks in
    ``idle`` skip the last level (they hold no points there), and so do their
    neighbours' messages to them (a live rank exchanges only with live ones)."""
    n = dims[0] * dims[1] * dims[2]
    out: dict[int, list[str]] = {}
    for r in range(n):
        lines = []
        for _ in range(iterations):
            for level in range(levels):
                if level == levels - 1 and r in idle:
                    continue
                for axis in range(3):
                    nb = [_neighbour(r, dims, axis, s) for s in (-1, 1)]
                    if level == levels - 1:
                        nb = [p for p in nb if p not in idle]
                    lines += [f"irecv {p} {axis} {face} 0" for p in nb]
                    lines += [f"send {p} {axis} {face} 0" for p in nb]
                    lines += [f"wait {p} {r} {axis}" for p in nb]
            lines.append("allreduce 1 1 0")
        out[r] = lines
    return out


def test_events_are_numbered_by_rounds():
    # two ranks exchange three rounds; rank 1 sends first in each
    ex = [("irecv", 1), ("send", 1), ("wait", 1)]
    rounds = exchange_rounds([ex * 3, [("irecv", 0), ("send", 0), ("wait", 0)] * 3])
    assert rounds == [[0, 1, 2], [0, 1, 2]]


def test_a_rank_that_skips_rounds_rejoins_its_neighbours_round():
    # ranks 0 and 1 exchange three rounds; rank 2 sits them out, then receives from
    # rank 1 (which sends in round 3) and answers: in round 4, not in its own first
    a = [("irecv", 1), ("send", 1), ("wait", 1)]
    b = [("irecv", 0), ("send", 0), ("wait", 0)]
    rounds = exchange_rounds([a * 3, b * 3 + [("send", 2)], [("recv", 1), ("send", 1)]])
    assert rounds == [[0, 1, 2], [0, 1, 2, 3], [4]]


def test_collectives_align_every_clock():
    ex0 = [("irecv", 1), ("send", 1), ("wait", 1)]
    ex1 = [("irecv", 0), ("send", 0), ("wait", 0)]
    # ranks 0 and 1 exchange twice, rank 2 not at all; after the collective all three
    # send in the same round
    rounds = exchange_rounds([ex0 * 2 + [("collective",), ("send", 2)],
                              ex1 * 2 + [("collective",), ("send", 2)],
                              [("collective",), ("recv", 0), ("recv", 1), ("send", 0)]])
    assert rounds == [[0, 1, 2], [0, 1, 2], [3]]


def test_sendrecv_waitall_and_send_requests():
    rounds = exchange_rounds([
        [("sendrecv", 1, 1), ("irecv", 1), ("send", 1), ("wait", 0), ("waitall",)],
        [("sendrecv", 0, 0), ("irecv", 0), ("send", 0), ("waitall",)]])
    # the wait for rank 0's own send request blocks nothing
    assert rounds == [[0, 1], [0, 1]]


def test_an_unmatched_receive_gives_no_rounds():
    assert exchange_rounds([[("recv", 1)], [("recv", 0)]]) is None
    assert exchange_rounds([[("collective",)], []]) is None


@pytest.mark.parametrize("dims,idle", [((4, 2, 2), frozenset()),
                                       ((4, 4, 4), frozenset({0, 21, 42}))])
def test_small_exchanges_become_aligned_rounds(tmp_path, dims, idle):
    # idle ranks never both neighbours of a live rank in one axis: every live rank
    # exchanges in every round (one that had nothing to exchange could not know)
    iterations, levels = 3, 2
    n = dims[0] * dims[1] * dims[2]
    g = import_ti_phases([_write(tmp_path, _mg(dims, iterations, levels, idle))])
    rounds = [p for p in g.phases if p.pace == "rounds"]
    # idle ranks do not shift the rounds: one per iteration, level and axis
    assert len(rounds) == iterations * levels * 3
    assert all(p.sync is None and p.repeat == 1 for p in rounds)
    for k, phase in enumerate(rounds):
        level, axis = (k // 3) % levels, k % 3
        expected = {(r, p) for r in range(n) for p in
                    (_neighbour(r, dims, axis, s) for s in (-1, 1))
                    if not (level == levels - 1 and (r in idle or p in idle))}
        u, v, w = phase.graph.edges()
        assert {(int(a), int(b)) for a, b in zip(u, v, strict=True)} | \
            {(int(b), int(a)) for a, b in zip(u, v, strict=True)} == \
            expected | {(b, a) for a, b in expected}
    total = import_ti([tmp_path / "t"])
    assert np.allclose(g.to_csr().toarray(), total.to_csr().toarray())
    merged = merge_global_phases(g)
    mrounds = [p for p in merged.phases if p.pace == "rounds"]
    # without idle ranks both levels exchange the same borders: one round per axis
    assert [p.repeat for p in mrounds] == ([iterations] * 6 if idle
                                           else [iterations * levels] * 3)


def test_a_bandwidth_sized_message_keeps_the_trace_unsplit(tmp_path):
    lines = _mg((4, 2, 2), 2)
    lines[0].insert(0, f"send 1 9 {BULK} 0")
    lines[1].insert(0, f"recv 0 9 {BULK} 0")
    assert BULK * 8 > PIPELINE_BYTES
    g = import_ti_phases([_write(tmp_path, lines)])
    assert not [p for p in g.phases if p.pace == "rounds"]


def test_a_wavefront_trace_is_unchanged(tmp_path):
    g = import_ti_phases([_write(tmp_path, _wavefront(4, 2, 2))])
    assert {p.pace for p in g.phases} == {"", "sweep"}


def test_import_stores_rounds_and_their_repeats(tmp_path, capsys):
    index = _write(tmp_path, _mg((4, 2, 2), 3, 2, frozenset({0, 5})))
    store = tmp_path / "store"
    assert main(["profile", "import", "--format", "smpi-ti", str(index), "--name", "mg",
                 "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "exchanged in 18 rounds" in out
    text = (store / "mg.toml").read_text()
    assert '"rounds"' in text and "repeats = [" in text
    loaded = ProfileStore([store]).load("mg", 16)
    direct = merge_global_phases(import_ti_phases([index]))
    assert [p.pace for p in loaded.phases] == [p.pace for p in direct.phases]
    for a, b in zip(loaded.phases, direct.phases, strict=True):
        # a round keeps its repeat; the others' repeats are in their volumes
        assert a.repeat == (b.repeat if b.pace == "rounds" else 1)
        assert np.isclose(a.repeat * a.graph.total_volume, b.repeat * b.graph.total_volume)
    machine = Hierarchy.homogeneous([4, 2, 2], [1, 10, 100])
    rng = np.random.default_rng(1)
    for _ in range(5):
        pi = rng.permutation(16)
        assert round_latency(loaded, machine, pi, [0, 1]) == \
            round_latency(direct, machine, pi, [0, 1])
    assert main(["profile", "show", "mg", "--store", str(store)]) == 0
    assert "exchange rounds: 6 distinct, 18 in all" in capsys.readouterr().out


@pytest.mark.parametrize("value,why", [
    ("[1]", "values for"), ('[1, "x", 1]', "is not a positive number"),
    ("[1, 0, 1]", "is not a positive number"), ("[1, true, 1]", "is not a positive number")])
def test_repeats_errors_name_the_line(tmp_path, value, why):
    store = tmp_path / "store"
    store.mkdir()
    ring = "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n3 2 1\n"
    for name in ("a", "p0", "p1", "p2"):
        (store / f"{name}.mtx").write_text(ring)
    (store / "a.mtx").write_text(ring.replace(" 1\n", " 3\n"))
    (store / "a.toml").write_text(
        'ranks = 3\nfile = "a.mtx"\nphases = ["p0.mtx", "p1.mtx", "p2.mtx"]\n'
        f"repeats = {value}\n")
    with pytest.raises(ProfileError, match=rf"a\.toml:4: repeats.*{why}"):
        ProfileStore([store]).load("a", 3)
