"""GPU domains ([gpus] domains: GPUs joined by NVLink/NVSwitch/xGMI) as the level below
the node for GPU ranks, checked on the bind file by an oracle that knows only the
documented model, against brute force over every placement."""

import itertools
from dataclasses import replace

import pytest

from mapper import CommGraph
from slurm_plugin.common.hostlist import per_node
from slurm_plugin.machine.gpus import gpu_bind_mask, job_gpus
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.site.config import parse_config
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.gres import parse_gres_conf
from slurm_plugin.slurm.topology import NodeShape

#: GPUs 0 and 2 beside socket 0, 1 and 3 beside socket 1; NVLink pairs 0-1 and 2-3, so
#: every domain spans both sockets
GRES = "".join(f"NodeName=g[1-2] Name=gpu File=/dev/nvidia{i} Cores={c}\n"
               for i, c in enumerate(["0-3", "4-7", "0-3", "4-7"]))
DOMAINS = [[0, 1], [2, 3]]
#: heavy pairs that Slurm's block order splits
HEAVY = [(0, 5), (1, 6), (2, 7), (3, 4)]
EDGES = [(a, b, 100.0) for a, b in HEAVY] + [(r, (r + 1) % 8, 1.0) for r in range(8)]
D_DOMAIN, D_NODE = 1.0, 10.0


def plan_of(domains: list[list[int]] | None):
    gres = parse_gres_conf(GRES, "gres.conf")
    alloc = Allocation("1", ("g1", "g2"), (4, 4), gpus={"g1": (0, 1, 2, 3), "g2": (0, 1, 2, 3)},
                       gpus_per_task=1)
    gpus, _ = job_gpus(alloc, gres)
    layout = build_layout(alloc, NodeShape(2, 4), None, [D_DOMAIN, D_NODE, 100.0], gpus=gpus,
                          gpu_domains={n: domains for n in alloc.nodes} if domains else None)
    layout = replace(layout, gpu_mask=gpu_bind_mask(alloc, gres))
    u, v, w = zip(*EDGES, strict=True)
    return layout, make_plan(layout, CommGraph.from_edges(list(u), list(v), list(w), n=8),
                             algorithm="strong", time_limit=10, units="bytes")


def records(plan) -> dict[int, tuple[str, int]]:
    """rank -> (host, GPU) from the bind file."""
    out = {}
    for line in plan.files["bindings"].splitlines()[1:]:
        rank, host, _, gpu, *_ = line.split()
        out[int(rank)] = (host, int(gpu.removeprefix("gpu=")))
    return out


def cost(where: dict[int, tuple[str, int]]) -> float:
    """J of the documented model: same node and same GPU domain d0, same node d1,
    else the next level (one switch level here)."""
    def dist(a, b):
        (ha, ga), (hb, gb) = where[a], where[b]
        if ha != hb:
            return 100.0
        return D_DOMAIN if ga // 2 == gb // 2 else D_NODE
    return sum(w * dist(a, b) for a, b, w in EDGES)


def test_gpu_ranks_are_placed_by_their_gpus_domain_as_well_as_brute_force_does():
    layout, plan = plan_of(DOMAINS)
    assert layout.hierarchy.level_names[0] == "socket or GPU domain"
    assert any("GPU domains" in n for n in layout.notes)
    where = records(plan)
    slots = list(where.values())
    best = min(cost(dict(enumerate(p))) for p in itertools.permutations(slots))
    assert cost(where) == pytest.approx(best)
    for a, b in HEAVY:   # each heavy pair on one node, in one NVLink domain
        assert where[a][0] == where[b][0] and where[a][1] // 2 == where[b][1] // 2, where


def test_without_domains_the_pairs_share_a_socket_not_a_domain():
    layout, plan = plan_of(None)
    assert layout.hierarchy.level_names[0] == "socket"
    where = records(plan)
    for a, b in HEAVY:
        assert where[a][0] == where[b][0] and where[a][1] % 2 == where[b][1] % 2, where


def test_domains_are_read_per_node_type_and_checked():
    cfg = parse_config('[gpus]\ndomains = { "g[1-2]" = [[0, 1], [2, 3]], "h1" = [[0]] }\n',
                       "d.toml")
    assert per_node(cfg.gpus.domains, ("g2", "x9")) == {"g2": [[0, 1], [2, 3]]}
    from slurm_plugin.site.config import ConfigError
    with pytest.raises(ConfigError, match=r"d.toml: \[gpus\] domains: 'g1': GPU 1 is in two"):
        parse_config('[gpus]\ndomains = { "g1" = [[0, 1], [1, 2]] }\n', "d.toml")
    with pytest.raises(ConfigError, match=r"\[gpus\] domains: 'g1': must be a list of lists"):
        parse_config('[gpus]\ndomains = { "g1" = [0, 1] }\n', "d.toml")
