"""map_processes(baseline=...): the result is never worse than the caller's placement."""

import numpy as np
import pytest

from mapper import Hierarchy, evaluate, map_processes
from mapper.objectives.qap import MappingError
from tests.helpers.mapper_cases import random_graph


@pytest.mark.parametrize("seed", range(6))
def test_never_worse_than_the_baseline(seed):
    machine = Hierarchy.parse("4:4:4", "1:10:100")
    graph = random_graph(64, 0.08, seed)
    rng = np.random.default_rng(seed)
    baseline = rng.permutation(64)
    r = map_processes(graph, machine, "random", seed, baseline=baseline)
    base_j = evaluate(graph, machine, baseline).objective
    assert r.objective <= base_j
    assert set(r.candidates) == {"random", "baseline", "baseline+n10"}
    assert r.candidates["baseline"] == pytest.approx(base_j)
    assert r.objective == pytest.approx(min(r.candidates.values()))
    assert r.objective == pytest.approx(evaluate(graph, machine, r.mapping).objective)


def test_an_optimal_baseline_is_kept_on_a_tie():
    machine = Hierarchy.parse("2:2", "1:10")
    from mapper import CommGraph

    graph = CommGraph.from_edges([0, 2], [1, 3], [5.0, 5.0], n=4)
    r = map_processes(graph, machine, "topdown+n10", baseline=np.arange(4))
    assert r.origin == "baseline" and list(r.mapping) == [0, 1, 2, 3]


def test_a_poor_baseline_loses_to_the_algorithm():
    machine = Hierarchy.parse("4:4:4", "1:10:100")
    from slurm_plugin.profiles.generators import generate

    graph = generate("stencil3d:4x4x4", 64)
    worst = np.random.default_rng(1).permutation(64)
    r = map_processes(graph, machine, "topdown", baseline=worst)
    assert r.origin in ("algorithm", "baseline+n10")
    assert r.objective < evaluate(graph, machine, worst).objective


def test_a_baseline_that_is_not_a_bijection_is_refused():
    machine = Hierarchy.parse("2:2", "1:10")
    from mapper import CommGraph

    graph = CommGraph.from_edges([0], [1], [1.0], n=4)
    with pytest.raises(MappingError):
        map_processes(graph, machine, "identity", baseline=np.array([0, 0, 1, 2]))
