"""Presets fast / eco / strong (issue 12 item 1): valid names everywhere (solver, CLI,
site config, SPANK plugin), what each runs, and that the extra work only ever helps."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from mapper import CommGraph, DistanceMatrix, Hierarchy
from mapper.model.networks import NodeHopMachine
from mapper.search import communication_neighborhood, iterated_local_search
from mapper.solve.algorithm_names import PRESETS, normalize_algorithm
from mapper.solve.api import map_processes
from slurm_plugin.commands.cli import main as mapper_main
from slurm_plugin.profiles.generators import generate
from slurm_plugin.site.config import ConfigError, parse_config
from tests.helpers.mapper_cases import distance_matrix
from tests.helpers.paths import REPO
from tests.helpers.spank_harness import needs_cc, spank_checker

ROOT = REPO
SPANK_C = ROOT / "slurm_plugin/spank/rankmap_spank.c"


def j_of(graph: CommGraph, machine: Hierarchy, pe: np.ndarray) -> float:
    """J recomputed here from the edge list and the arities of the hierarchy's name
    (shares nothing with the solver's objective)."""
    arities = [int(x) for x in machine.describe().split(" / ")[0].split(":")] \
        if hasattr(machine, "describe") else None
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    keep = rows < graph.indices
    total = 0.0
    for a, b, c in zip(pe[rows[keep]], pe[graph.indices[keep]], graph.weights[keep],
                       strict=True):
        total += c * _dist(arities, machine.distances, int(a), int(b))
    return total


def _dist(arities: list[int], distances, p: int, q: int) -> float:
    if p == q:
        return 0.0
    size = 1
    for level, arity in enumerate(arities):
        size *= arity
        if p // size == q // size:
            return float(distances[level])
    raise AssertionError("PEs in no common group")


def test_the_c_plugin_knows_the_same_presets():
    listed = re.search(r"presets\[\] = \{([^}]*)\}", SPANK_C.read_text()).group(1)
    assert tuple(re.findall(r'"([a-z]+)"', listed)) == PRESETS


@pytest.mark.parametrize("name", ["fast", "Eco", "STRONG"])
def test_config_and_solver_accept_preset_names(name):
    cfg = parse_config(f'[solver]\nalgorithm = "{name}"\n', "t.toml")
    assert cfg.solver.algorithm == normalize_algorithm(name) == name.lower()
    cfg = parse_config(f'[solver]\ndefault_preset = "{name.lower()}"\n', "t.toml")
    assert cfg.solver.algorithm == name.lower()
    g = generate("stencil3d:4x4x2", 32)
    r = map_processes(g, Hierarchy.parse("4:2:4", "1:10:100"), name)
    assert sorted(r.mapping.tolist()) == list(range(32))
    assert r.algorithm == name and r.notes[0].startswith(f"preset {name.lower()}:")


def test_default_preset_is_fast_and_algorithm_overrides_it():
    assert parse_config("", "t.toml").solver.algorithm == "fast"
    cfg = parse_config('[solver]\ndefault_preset = "strong"\nalgorithm = "greedy+n10"\n',
                       "t.toml")
    assert cfg.solver.algorithm == "greedy+n10"
    with pytest.raises(ConfigError, match=r"t.toml: \[solver\] default_preset: must be one of "
                                          r"fast, eco, strong, got 'topdown\+n10'"):
        parse_config('[solver]\ndefault_preset = "topdown+n10"\n', "t.toml")


def test_a_preset_on_a_network_site():
    net = '[network]\nkind = "torus"\ndims = [2, 2]\nnodes = "n[1-4]"\n'
    assert parse_config(net, "x.toml").solver.algorithm == "ohtma+n10"
    cfg = parse_config(net + '[solver]\ndefault_preset = "eco"\n', "x.toml")
    assert cfg.solver.algorithm == "eco"


def _rugged(n: int = 256, seed: int = 3, radius: float = 0.12) -> CommGraph:
    # a random geometric graph: many local optima for 2-swaps
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    d = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    a, b = np.nonzero(np.triu(d < radius, 1))
    return CommGraph.from_edges(a, b, rng.uniform(1, 10, len(a)), n=n, source="rgg")


def test_more_work_never_hurts_and_strong_beats_fast_on_a_rugged_instance():
    g, h = _rugged(), Hierarchy.parse("4:4:16", "1:10:100")
    res = {p: map_processes(g, h, p, seed=0) for p in PRESETS}
    for p, r in res.items():
        assert sorted(r.mapping.tolist()) == list(range(g.n))
        assert r.objective == pytest.approx(j_of(g, h, r.mapping), rel=1e-9), p
    # eco's starts include fast's, strong's include eco's, and the search only accepts
    # improvements: the order is guaranteed
    assert res["strong"].objective <= res["eco"].objective <= res["fast"].objective
    assert res["strong"].objective < res["fast"].objective
    # fast is Top-Down (splits not swap-refined) + N_C^10, and says so
    assert res["fast"].notes[0] == ("preset fast: topdown+n10 (splits not swap-refined: "
                                    "N_C^10 follows)")


def test_iterated_local_search_never_worsens_and_reports_its_gain():
    g, h = _rugged(128, seed=5), Hierarchy.parse("2:4:16", "1:10:100")
    pe = map_processes(g, h, "topdown+n10", seed=1).mapping.copy()
    before = j_of(g, h, pe)
    stats = iterated_local_search(g, h, pe, rounds=100, patience=100, patch=8, seed=2,
                                  work_per_element=None)
    after = j_of(g, h, pe)
    assert sorted(pe.tolist()) == list(range(128))
    assert after < before and stats.improvements > 0  # a 2-swap optimum, improved
    assert stats.gain == pytest.approx(before - after, rel=1e-9, abs=1e-9)
    assert stats.rounds == 100  # patience equals rounds here


def _j_scratch(graph: CommGraph, machine, pe: np.ndarray) -> float:
    """J from the full PE distance matrix and the edge list (no solver gain code)."""
    dist = distance_matrix(machine)
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    keep = rows < graph.indices
    return float((graph.weights[keep] * dist[pe[rows[keep]], pe[graph.indices[keep]]]).sum())


def _ils_machine(kind: int):
    """An even hierarchy, an uneven tree, an explicit matrix or a node hop machine."""
    if kind == 0:
        return Hierarchy.parse("4:4:8", "1:10:100")
    if kind == 1:
        return Hierarchy.from_tree([[[3, 5], [4]], [[6, 2, 4], [8]]], [1, 4, 20, 50])
    if kind == 2:
        rng = np.random.default_rng(7)
        a = rng.integers(1, 30, (96, 96)).astype(float)
        a = a + a.T
        np.fill_diagonal(a, 0)
        return DistanceMatrix(a)
    trees = [Hierarchy.from_tree(sockets, [0.0, 2.0]) for sockets in
             ([8, 8], [16, 8], [12, 12], [8, 24])]
    hops = np.array([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]])
    return NodeHopMachine(hops, trees, per_hop=2.5, base=3.0)


@pytest.mark.parametrize("kind", range(4))
@pytest.mark.parametrize("start", ["random", "local optimum"])
def test_localized_iterated_search_is_exact_and_never_worse(kind, start):
    machine = _ils_machine(kind)
    n = machine.n
    g = _rugged(n, seed=kind + 11, radius=np.sqrt(6 / (np.pi * n)))  # mean degree ~6
    pe = (np.random.default_rng(kind).permutation(n).astype(np.int64) if start == "random"
          else map_processes(g, machine, "greedyallc+n10", seed=kind).mapping.copy())
    first = pe.copy()
    before = _j_scratch(g, machine, pe)
    stats = iterated_local_search(g, machine, pe, rounds=400, patience=400, patch=6,
                                  seed=kind, work_per_element=None)
    after = _j_scratch(g, machine, pe)
    assert sorted(pe.tolist()) == list(range(n))  # a bijection
    assert after <= before  # kept rounds lowered J, rejected ones were restored
    assert stats.rounds == 400 and stats.improvements > 0 and stats.work > 0
    # the incremental gains (kick + localized swaps) add up to J recomputed from scratch
    assert stats.gain == pytest.approx(before - after, rel=1e-9, abs=1e-9)
    # same seed, same result (no clock involved)
    again = first.copy()
    assert iterated_local_search(g, machine, again, rounds=400, patience=400, patch=6,
                                 seed=kind, work_per_element=None) == stats
    assert np.array_equal(again, pe)


def test_localized_iterated_search_is_cheaper_than_a_full_pass_per_round():
    # a round re-searches the kicked patch, not every rank: on 1024 ranks a round
    # costs a fraction of the swap-gain evaluations of one full N_C^10 search from the
    # (unkicked) local optimum, which is what every round used to run at least
    g, h = _rugged(1024, seed=2, radius=0.04), Hierarchy.parse("4:16:16", "1:10:100")
    pe = map_processes(g, h, "topdown+n10", seed=0).mapping.copy()
    full = communication_neighborhood(g, h, pe.copy(), 10, 0)
    stats = iterated_local_search(g, h, pe, rounds=300, patience=300, patch=20, seed=0,
                                  work_per_element=None)
    assert stats.rounds == 300 and stats.improvements > 0
    assert stats.evaluations < 300 * full.evaluations / 4


def test_work_bound_stops_the_iterated_search_deterministically():
    g, h = _rugged(512, seed=4, radius=0.06), Hierarchy.parse("4:8:16", "1:10:100")
    start = map_processes(g, h, "topdown+n10", seed=0).mapping.copy()
    free = iterated_local_search(g, h, start.copy(), rounds=300, patience=300,
                                 patch=10, seed=1, work_per_element=None)
    runs = []
    for _ in range(2):
        pe = start.copy()
        runs.append((iterated_local_search(g, h, pe, rounds=300, patience=300,
                                           patch=10, seed=1, work_per_element=200.0), pe))
    (s1, pe1), (s2, pe2) = runs
    budget = 200.0 * (g.n + g.m)
    assert s1 == s2 and np.array_equal(pe1, pe2)  # work, not the clock, stopped it
    # no round starts after the bound: over it by about one round (the same seed
    # makes the same rounds, so the bounded run is a prefix of the free one)
    assert budget <= s1.work < budget + 10 * free.work / free.rounds
    assert s1.rounds < free.rounds == 300


def test_iterated_search_honours_its_time_limit():
    g, h = _rugged(1024, seed=2, radius=0.04), Hierarchy.parse("4:16:16", "1:10:100")
    pe = map_processes(g, h, "topdown+n10", seed=0).mapping.copy()
    before = j_of(g, h, pe)
    stats = iterated_local_search(g, h, pe, rounds=10**9, patience=10**9, patch=20,
                                  seed=0, time_limit=0.2, work_per_element=None)
    assert stats.hit_time_limit  # 10^9 rounds: only the limit can have stopped it
    assert sorted(pe.tolist()) == list(range(1024))
    assert stats.gain == pytest.approx(before - j_of(g, h, pe), rel=1e-9, abs=1e-9)


def test_strong_is_deterministic_for_a_seed():
    g, h = _rugged(), Hierarchy.parse("4:4:16", "1:10:100")
    a, b = (map_processes(g, h, "strong", seed=3) for _ in range(2))
    assert np.array_equal(a.mapping, b.mapping) and a.objective == b.objective


def test_strong_finds_the_optimum_of_small_instances_by_brute_force():
    h = Hierarchy.parse("2:2:2", "1:10:100")
    found = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        a, b = np.triu_indices(8, 1)
        keep = rng.random(len(a)) < 0.5
        g = CommGraph.from_edges(a[keep], b[keep], rng.integers(1, 20, keep.sum()), n=8,
                                 source="small")
        perms = np.array(list(itertools.permutations(range(8))))
        dist = np.array([[_dist([2, 2, 2], h.distances, p, q) for q in range(8)]
                         for p in range(8)])
        rows = np.repeat(np.arange(8), np.diff(g.indptr))
        keep = rows < g.indices
        u, v, w = rows[keep], g.indices[keep], g.weights[keep]
        best = float((dist[perms[:, u], perms[:, v]] * w).sum(axis=1).min())
        r = map_processes(g, h, "strong", seed=0)
        assert r.objective >= best - 1e-9
        found += r.objective <= best + 1e-9
    assert found >= 11, found


def test_map_cli_preset(tmp_path, capsys):
    graph = tmp_path / "g.mtx"
    g = generate("stencil3d:4x4x4", 64)
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    keep = rows < g.indices
    graph.write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                     f"64 64 {keep.sum()}\n" + "".join(
                         f"{v + 1} {u + 1} {w:g}\n" for u, v, w in
                         zip(rows[keep], g.indices[keep], g.weights[keep], strict=True)))
    out = tmp_path / "m.txt"
    assert mapper_main(["map", str(graph), "--hierarchy", "4:4:4", "--distances", "1:10:100",
                        "--preset", "eco", "--output", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["algorithm"] == "eco"
    assert sorted(int(x) for x in out.read_text().split()) == list(range(64))
    with pytest.raises(SystemExit):
        mapper_main(["map", str(graph), "--hierarchy", "4:4:4", "--preset", "eco",
                     "--algorithm", "greedy", "--output", str(out)])


@needs_cc
def test_the_c_plugin_accepts_presets(tmp_path):
    check = spank_checker(tmp_path)
    assert check("choice", ["strong", "Eco", "fast", "strong+n2", "faster"]) == \
        [True, True, True, False, False]


@pytest.mark.parametrize("name", ["fast", "eco", "strong"])
def test_only_strong_runs_the_moves_beyond_two_swaps_with_its_work_bound(monkeypatch, name):
    """Issue 12 item 4: the 3-cycles and ejection chains are used by ``strong`` (with the
    preset's work bound), not by the cheaper presets."""
    import mapper.solve.runner
    from mapper.solve.presets import STRONG_CYCLE_WORK

    _, _, result, calls = _preset_run_spying(
        monkeypatch, mapper.solve.runner, "cycle_search", name,
        lambda args, kwargs: kwargs.get("work_per_element"))
    assert sorted(result.mapping.tolist()) == list(range(256))
    assert calls == ([STRONG_CYCLE_WORK] if name == "strong" else [])


def _preset_run_spying(monkeypatch, module, attr: str, name: str, record):
    """Preset ``name`` on a 256-rank stencil with ``module.attr`` wrapped so that every
    call appends ``record(args, kwargs)``: (graph, machine, result, records)."""
    calls = []
    real = getattr(module, attr)

    def spy(*args, **kwargs):
        calls.append(record(args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, attr, spy)
    graph = generate("stencil3d:8x8x4", 256)
    machine = Hierarchy.parse("4:8:8", "1:10:100")
    return graph, machine, map_processes(graph, machine, name, seed=1), calls


@pytest.mark.parametrize("name", ["fast", "eco"])
def test_only_the_presets_after_fast_swap_refine_their_splits(monkeypatch, name):
    """``fast`` leaves each Top-Down split as METIS + repair made it (its N_C^10 does
    the swaps, with the machine's distances); ``eco`` refines its own starts' splits and
    runs ``fast``'s start as well, so it is never worse than ``fast``."""
    import mapper.partitioners.metis

    graph, machine, result, calls = _preset_run_spying(
        monkeypatch, mapper.partitioners.metis, "refine_cut", name,
        lambda args, kwargs: len(args[1]))
    assert sorted(result.mapping.tolist()) == list(range(256))
    assert (len(calls) > 0) == (name != "fast")
    fast = map_processes(graph, machine, "fast", seed=1)
    assert result.objective <= fast.objective + 1e-9
