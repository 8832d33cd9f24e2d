"""Busiest links per level (mapper.objectives.congestion) and the never-worse rule that uses
them."""

import numpy as np
import pytest

from mapper import Hierarchy, LinkModel, evaluate, map_processes
from mapper.model.machine import MachineError
from mapper.objectives.congestion import UplinkLoad, raised_uplink, uplink_loads
from mapper.solve.never_worse import LINK_TOLERANCE
from slurm_plugin.profiles.generators import generate
from tests.helpers.mapper_cases import random_graph


def _naive_cuts(graph, machine, mapping, level):
    """Volume of the edges with one end inside each level group, by a double loop."""
    groups = len(machine.bounds[level]) - 1
    cut = [0.0] * groups
    u, v, w = graph.edges()
    for a, b, x in zip(u, v, w, strict=True):
        ga = machine.group_ids[mapping[a], level]
        gb = machine.group_ids[mapping[b], level]
        if ga != gb:
            cut[ga] += x
            cut[gb] += x
    return cut


@pytest.mark.parametrize("seed", range(5))
def test_uplink_loads_equal_a_naive_count(seed):
    # an uneven machine: groups of different sizes at every level
    machine = Hierarchy.from_tree([[3, 2, 4], [1, 5], [2, 2, 2, 3]], [1, 10, 100],
                                  ["node", "leaf", "root"])
    graph = random_graph(machine.n, 0.3, seed)
    mapping = np.random.default_rng(seed).permutation(machine.n)
    loads = uplink_loads(graph, machine, mapping, [0, 1])
    for load in loads:
        cuts = _naive_cuts(graph, machine, mapping, load.level)
        assert load.volume == pytest.approx(max(cuts))
        assert cuts[load.group] == pytest.approx(max(cuts))
        assert load.name == machine.level_names[load.level]


def test_the_root_has_no_uplink():
    machine = Hierarchy.parse("2:2", "1:10")
    graph = random_graph(4, 0.5, 0)
    with pytest.raises(ValueError, match="no uplink"):
        uplink_loads(graph, machine, np.arange(4), [1])


def test_raised_uplink_names_the_first_level_that_got_busier():
    machine = Hierarchy.parse("2:2:2", "1:10:100")
    graph = generate("ring", 8)
    block = uplink_loads(graph, machine, np.arange(8), [0, 1])
    spread = uplink_loads(graph, machine, np.array([0, 2, 4, 6, 1, 3, 5, 7]), [0, 1])
    assert raised_uplink(block, block) is None
    assert raised_uplink(block, spread) is None  # block loads no link more
    assert raised_uplink(spread, block).level == 0


def test_a_lower_j_that_loads_a_link_more_is_refused():
    # NPB CG's pattern on nodes of two sockets: topdown+n10 finds J 20 % lower than
    # the block order but puts more volume on the busiest node's link (measured in
    # SimGrid: such trades run slower, see README "Does it pay?")
    machine = Hierarchy.parse("4:2:4:2", "1:10:100:1000")
    graph = generate("npb-cg", 64)
    block = np.arange(64)
    raw = map_processes(graph, machine, "topdown+n10", 0)
    assert raw.objective < evaluate(graph, machine, block).objective
    assert raised_uplink(uplink_loads(graph, machine, raw.mapping, [1, 2]),
                         uplink_loads(graph, machine, block, [1, 2])) is not None
    r = map_processes(graph, machine, "topdown+n10", 0, baseline=block,
                      links=LinkModel(congestion_levels=[1, 2]))
    assert r.origin == "baseline" and list(r.mapping) == list(block)
    assert "busiest" in r.rejected["topdown+n10"]
    # without the levels, J alone decides
    assert map_processes(graph, machine, "topdown+n10", 0, baseline=block).origin != "baseline"


@pytest.mark.parametrize("seed", range(8))
def test_the_result_never_loads_a_link_more_than_the_baseline(seed):
    machine = Hierarchy.parse("2:2:2:2", "1:10:100:1000")
    graph = random_graph(16, 0.25, seed)
    baseline = np.random.default_rng(seed).permutation(16)
    r = map_processes(graph, machine, "topdown+n10", seed, baseline=baseline,
                      links=LinkModel(congestion_levels=[1, 2]))
    assert r.objective <= evaluate(graph, machine, baseline).objective + 1e-9
    assert raised_uplink(uplink_loads(graph, machine, r.mapping, [1, 2]),
                         uplink_loads(graph, machine, baseline, [1, 2]),
                         LINK_TOLERANCE) is None


def test_a_rise_within_the_tolerance_is_not_a_rise():
    # measured profiles differ by ~0.5 % per pair between runs: that must not flip it
    base = (UplinkLoad(1, "node", 100.0, 0), UplinkLoad(2, "leaf", 400.0, 0))
    noisy = (UplinkLoad(1, "node", 101.0, 3), UplinkLoad(2, "leaf", 200.0, 1))
    assert raised_uplink(noisy, base, LINK_TOLERANCE) is None
    assert raised_uplink(noisy, base, 0.005).name == "node"
    assert 0.005 < LINK_TOLERANCE < 0.05


def test_congestion_levels_need_a_hierarchy():
    from mapper.model.machine import DistanceMatrix

    machine = DistanceMatrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    graph = random_graph(2, 1.0, 0)
    with pytest.raises(MachineError):
        map_processes(graph, machine, "random+n2", baseline=np.array([1, 0]),
                      links=LinkModel(congestion_levels=[0]))
