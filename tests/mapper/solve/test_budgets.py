"""Every budget honoured (issue 12 item 5): dense profiles, the uniform shortcut, and
the sparsified view that only the partitioner sees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy
from mapper.model.dense import search_depth, sparsify, uniform_pattern
from mapper.objectives.qap import evaluate
from mapper.solve.api import map_processes
from mapper.solve.runner import UNIFORM_NOTE
from slurm_plugin.profiles.generators import generate


def _dense(n: int, seed: int = 0, uniform: bool = False) -> CommGraph:
    a, b = np.triu_indices(n, 1)
    w = np.ones(len(a)) if uniform else np.random.default_rng(seed).uniform(1, 100, len(a))
    return CommGraph.from_edges(a, b, w, n=n, source="dense")


@pytest.fixture(scope="module")
def dense2048() -> CommGraph:
    return _dense(2048)


# 3 levels: 32 cores per node, 8 nodes per switch, 8 switches
MACHINE_2048 = Hierarchy.parse("32:8:8", "1:10:100")


@pytest.mark.parametrize("algorithm", ["topdown+n10", "bottomup+n10", "greedyallc+n10",
                                       "ohtma+n10", "fast", "eco", "strong"])
def test_dense_profile_within_budget(dense2048, algorithm):
    # How long each run takes against its budget is bench/bench_budgets.py's table
    # (profile "random", 2048 ranks, this machine): a clock is no test on a shared host.
    r = map_processes(dense2048, MACHINE_2048, algorithm, 0, 2.0)
    assert np.array_equal(np.sort(r.mapping), np.arange(2048))  # a bijection
    # J is that of the full graph, whatever the constructions looked at
    assert r.objective == pytest.approx(evaluate(dense2048, MACHINE_2048,
                                                 r.mapping).objective, rel=1e-12)


def test_uniform_shortcut_on_all_to_all():
    g = generate("alltoall", 512)
    machine = Hierarchy.parse("16:8:4", "1:10:100")
    r = map_processes(g, machine, "topdown+n10", 0, 5.0)
    assert any(UNIFORM_NOTE in note for note in r.notes)
    # nothing was constructed or searched: the identity is the only candidate
    assert r.candidates == {"topdown+n10": r.objective} and r.origin == "algorithm"
    assert np.array_equal(r.mapping, np.arange(512))
    assert np.array_equal(r.mapping, np.arange(512))  # the identity, nothing ran
    # every placement has this J: c · Σ_{p<q} D(p, q), checked on random ones
    rng = np.random.default_rng(1)
    for _ in range(3):
        other = evaluate(g, machine, rng.permutation(512)).objective
        assert other == pytest.approx(r.objective, rel=1e-12)
    base = rng.permutation(512)
    rb = map_processes(g, machine, "topdown+n10", 0, 5.0, baseline=base)
    assert np.array_equal(rb.mapping, base) and rb.origin == "baseline"
    assert rb.as_dict()["notes"] == list(rb.notes) and rb.notes


def test_uniform_pattern_small_cases_by_brute_force():
    """uniform_pattern says True exactly when all 4! placements have one J."""
    machine = Hierarchy.parse("2:2", "1:10")  # 4 PEs
    rng = np.random.default_rng(3)
    a, b = np.triu_indices(4, 1)
    cases = [np.ones(6), np.full(6, 2.5), np.r_[np.ones(5), 2.0], rng.uniform(1, 2, 6)]
    for w in cases:
        keep = w > 0
        g = CommGraph.from_edges(a[keep], b[keep], w[keep], n=4)
        js = {round(evaluate(g, machine, np.array(p)).objective, 9)
              for p in itertools.permutations(range(4))}
        assert uniform_pattern(g) == (len(js) == 1)
    missing = CommGraph.from_edges(a[1:], b[1:], np.ones(5), n=4)  # one pair silent
    assert not uniform_pattern(missing)
    assert uniform_pattern(CommGraph.from_edges([], [], [], n=4))  # no edge: J = 0


@pytest.mark.parametrize("spec", ["stencil3d:8x8x8", "heavier"])
def test_uniform_shortcut_not_on_stencil_or_one_heavier_edge(spec):
    if spec == "heavier":
        a, b = np.triu_indices(512, 1)
        w = np.ones(len(a))
        w[7] = 2.0  # one pair exchanges more: placement matters again
        g = CommGraph.from_edges(a, b, w, n=512)
    else:
        g = generate(spec, 512)
    assert not uniform_pattern(g)
    r = map_processes(g, Hierarchy.parse("16:8:4", "1:10:100"), "topdown+n10", 0, 5.0)
    assert not any(UNIFORM_NOTE in note for note in r.notes)
    if spec == "heavier":
        # the heavy pair ends up on one node (distance 1): the solver did run
        pe = r.mapping
        assert pe[a[7]] // 16 == pe[b[7]] // 16


def test_sparsify_keeps_each_vertex_top_k_by_brute_force():
    rng = np.random.default_rng(5)
    g = _dense(120, seed=5)
    adj = g.to_csr()
    k = 7
    s = sparsify(adj, k).toarray()
    d = adj.toarray()
    keep = np.zeros_like(d, dtype=bool)
    for i in range(120):
        nz = np.flatnonzero(d[i])
        keep[i, nz[np.argsort(-d[i, nz])[:k]]] = True
    keep |= keep.T
    assert np.array_equal(s, np.where(keep, d, 0.0))
    assert (s != 0).sum(axis=1).min() >= k
    sparse = generate("stencil3d:4x4x4", 64).to_csr()  # degree <= 6 <= k: unchanged
    assert sparsify(sparse, k) is sparse
    del rng


def test_search_depth_exact_on_complete_graph_and_unchanged_on_stencil():
    assert search_depth(_dense(64), 10, 10**9) == 1  # N_C^1 = N_C^10 on K_n
    stencil = generate("stencil3d:16x16x16", 4096)
    assert search_depth(stencil, 10, 250_000) == 10
    assert search_depth(stencil, 10, 200) < 10


def test_dense_result_is_evaluated_on_the_full_graph():
    """The constructions see a sparsified view; J must still be the full graph's."""
    g = _dense(512, seed=2)
    machine = Hierarchy.parse("16:8:4", "1:10:100")
    for algorithm in ("topdown", "bottomup", "greedyallc"):
        r = map_processes(g, machine, algorithm, 0, 5.0)
        full = evaluate(g, machine, r.mapping).objective
        assert r.objective == pytest.approx(full, rel=1e-12)
        pruned = CommGraph.from_matrix(sparsify(g.to_csr(), 32), directed=False)
        assert evaluate(pruned, machine, r.mapping).objective < 0.5 * full


def test_topdown_out_of_time_still_returns_a_bijection():
    from mapper.construction import bottom_up, top_down

    g = generate("stencil3d:8x8x8", 512)
    machine = Hierarchy.parse("16:8:4", "1:10:100")
    for build in (top_down, bottom_up):
        pe = build(g, machine, 0, time_limit=1e-9)  # no partition may start
        assert np.array_equal(np.sort(pe), np.arange(512))


def test_uniform_note_reaches_the_cli_and_the_report(tmp_path, capsys):
    """The solver's note is shown to users: `rankmap map --json` and the job report."""
    import json as _json

    from slurm_plugin.commands.cli import main

    assert main(["plan", "--profile", "alltoall", "--out", str(tmp_path / "plan")]) == 0
    report = (tmp_path / "plan" / "report.txt").read_text()
    assert "every placement has the same J (uniform all-to-all)" in report
    graph = tmp_path / "a2a.mtx"
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    write_mtx(generate("alltoall", 16), graph)
    capsys.readouterr()
    assert main(["map", str(graph), "--hierarchy", "4:4", "--distances", "1:10",
                 "--output", str(tmp_path / "map.txt"), "--json"]) == 0
    summary = _json.loads(capsys.readouterr().out)
    assert any("uniform all-to-all" in note for note in summary["notes"])


def test_nc_search_stops_in_a_pass_where_no_rank_can_gain():
    """From Slurm's block placement of a 3D stencil nearly every rank already sits in
    its best group and is skipped at once; the clock must still be read while skipping
    (it was read only after ranks that were searched, so a whole pass ran past the
    limit: 0.9 s at 2^20 ranks with a 0.01 s budget)."""
    from mapper.search import communication_neighborhood

    graph = generate("stencil3d", 1 << 17)
    machine = Hierarchy.parse("64:2:32:16:2", "1:10:100:1000:10000")
    free = np.arange(graph.n, dtype=np.int64)
    whole = communication_neighborhood(graph, machine, free, 10, 0)
    assert not whole.hit_time_limit and whole.passes >= 1  # a pass finds (almost) nothing
    cut = np.arange(graph.n, dtype=np.int64)
    stats = communication_neighborhood(graph, machine, cut, 10, 0, time_limit=1e-4)
    assert stats.hit_time_limit


def test_quadratic_search_stops_on_a_machine_of_equivalent_pes():
    """N^2 skips pairs of equivalent PEs before its clock check; on a one-level
    machine every pair is one, and 32768 ranks took 0.45 s on a 0.2 s budget."""
    graph = generate("stencil3d", 32768)
    machine = Hierarchy.parse("32768", "1")
    result = map_processes(graph, machine, "identity+n2", 0, 0.05)
    assert result.hit_time_limit  # a whole pass (no swap is possible) would converge
