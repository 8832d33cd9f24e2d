"""J of rendered launcher files, recomputed from scratch.

Written apart from the product: it imports nothing from ``mapper`` or ``slurm_plugin``
and reads only what a site has — the rankfile (or machinefile) a job got, the
topology.conf text and the node shapes — so that a test comparing its J with the
report's J checks the whole chain (layout, PE numbering, solver, rendering, report).

Distances follow the documented model: two ranks on one socket are ``d[0]`` apart, on
one node ``d[1]``; otherwise their nodes' switch paths (leaf switch first) are padded at
the top to the job's deepest path by repeating their top switch, and ranks whose padded
paths first agree at index i are ``d[2 + i]`` apart; paths that never agree (different
trees, nodes outside the tree) are ``d[2 + depth]`` apart.
"""

from __future__ import annotations

import re


def expand_names(text: str) -> list[str]:
    """``p[0,4-5],q`` → p0, p4, p5, q (the subset of Slurm's syntax the tests write)."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{width}d}")
    return out


def switch_paths(topology_conf: str) -> dict[str, list[str]]:
    """Node → its switches from the leaf switch up, from topology.conf text."""
    leaf_of: dict[str, str] = {}
    parent: dict[str, str] = {}
    for line in topology_conf.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line.split("#")[0]))
        if "SwitchName" not in fields:
            continue
        for node in expand_names(fields.get("Nodes", "")) if "Nodes" in fields else []:
            leaf_of[node] = fields["SwitchName"]
        for child in expand_names(fields["Switches"]) if "Switches" in fields else []:
            parent[child] = fields["SwitchName"]
    paths = {}
    for node, leaf in leaf_of.items():
        path = [leaf]
        while path[-1] in parent:
            path.append(parent[path[-1]])
        paths[node] = path
    return paths


def parse_rankfile(text: str) -> dict[int, tuple[str, int, tuple[int, ...]]]:
    """rank → (host, socket, cores) from ``rank R=HOST slot=S:C[-C|,C]`` lines; a slot
    spanning sockets (``slot=0:2-3;1:0-1``) gives its first socket and that socket's
    cores (:func:`parse_rankfile_cores` has them all)."""
    return {r: (h, cores[0][0], tuple(c for s, c in cores if s == cores[0][0]))
            for r, (h, cores) in parse_rankfile_cores(text).items()}


def parse_rankfile_cores(text: str) -> dict[int, tuple[str, tuple[tuple[int, int], ...]]]:
    """rank → (host, ((socket, core in the socket), ...)) from Open MPI rankfile lines
    ``rank R=HOST slot=S:CORES[;S:CORES]...``, CORES a comma list of cores or ranges."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"rank (\d+)=(\S+) slot=(\d+:[\d,-]+(?:;\d+:[\d,-]+)*)", line.strip())
        if not m:
            raise ValueError(f"not a rankfile line: {line!r}")
        cores: list[tuple[int, int]] = []
        for spec in m.group(3).split(";"):
            socket, _, corelist = spec.partition(":")
            for part in corelist.split(","):
                lo, _, hi = part.partition("-")
                cores.extend((int(socket), c) for c in range(int(lo), int(hi or lo) + 1))
        out[int(m.group(1))] = (m.group(2), tuple(cores))
    return out


def rank_distance(a: tuple[str, int], b: tuple[str, int], paths: dict[str, list[str]],
                  depth: int, d: list[float]) -> float:
    """Distance of two ranks at (host, socket) ``a`` and ``b``."""
    if a[0] == b[0]:
        return d[0] if a[1] == b[1] else d[1]
    pa, pb = paths.get(a[0], []), paths.get(b[0], [])
    pa = pa + [pa[-1]] * (depth - len(pa)) if pa else [None] * depth
    pb = pb + [pb[-1]] * (depth - len(pb)) if pb else [None] * depth
    for i in range(depth):
        if pa[i] is not None and pa[i] == pb[i]:
            return d[2 + i]
    return d[2 + depth]


def objective(edges: list[tuple[int, int, float]], where: dict[int, tuple[str, int]],
              topology_conf: str, distances: list[float]) -> float:
    """J = Σ over undirected edges w · distance(where[u], where[v])."""
    paths = switch_paths(topology_conf)
    hosts = {h for h, _ in where.values()}
    depth = max((len(paths.get(h, [])) for h in hosts), default=0)
    return sum(w * rank_distance(where[u], where[v], paths, depth, distances)
               for u, v, w in edges if u != v)


def slurm_block_cyclic(node_list: list[str], sockets_of_tasks: dict[str, dict[int, int]]
                       ) -> dict[int, tuple[str, int]]:
    """Slurm's default ``block:cyclic``: ranks fill the nodes in node-list order; on a
    node, task k takes the next socket round-robin among sockets with slots left.
    ``sockets_of_tasks[node][socket]`` = task slots Slurm gave the job there."""
    where = {}
    rank = 0
    for node in node_list:
        left = dict(sorted(sockets_of_tasks[node].items()))
        while any(left.values()):
            for socket in list(left):
                if left[socket]:
                    where[rank] = (node, socket)
                    left[socket] -= 1
                    rank += 1
    return where


def busiest_links(edges: list[tuple[int, int, float]], where: dict[int, tuple[str, int]],
                  topology_conf: str) -> list[float]:
    """Volume on the busiest node link, then on the busiest uplink of each switch level
    (leaf first): for every node or switch, the volume of the edges with exactly one end
    below it.  Switch levels are the padded paths of :func:`rank_distance`; a node
    outside the tree is alone at every switch level."""
    paths = switch_paths(topology_conf)
    hosts = {h for h, _ in where.values()}
    depth = max((len(paths.get(h, [])) for h in hosts), default=0)

    def group(host: str, level: int):
        if level < 0:
            return host
        p = paths.get(host)
        if not p:
            return ("alone", host)
        return (p + [p[-1]] * (depth - len(p)))[level]

    out = []
    for level in range(-1, depth):
        cut: dict = {}
        for u, v, w in edges:
            gu, gv = group(where[u][0], level), group(where[v][0], level)
            if u != v and gu != gv:
                cut[gu] = cut.get(gu, 0.0) + w
                cut[gv] = cut.get(gv, 0.0) + w
        out.append(max(cut.values(), default=0.0))
    return out


def objective_shared_cores(edges: list[tuple[int, int, float]],
                           where: dict[int, tuple[str, int, tuple[int, ...]]],
                           topology_conf: str, distances: list[float],
                           core_distance: float) -> float:
    """J of an oversubscribed rankfile: two ranks bound to the same cores of one host are
    ``core_distance`` apart, all other pairs as in :func:`objective`."""
    paths = switch_paths(topology_conf)
    hosts = {h for h, _, _ in where.values()}
    depth = max((len(paths.get(h, [])) for h in hosts), default=0)
    total = 0.0
    for u, v, w in edges:
        if u == v:
            continue
        a, b = where[u], where[v]
        if a[0] == b[0] and a[1] == b[1] and a[2] == b[2]:
            total += w * core_distance
        else:
            total += w * rank_distance(a[:2], b[:2], paths, depth, distances)
    return total
