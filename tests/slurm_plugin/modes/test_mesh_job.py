"""``--comm-profile=mesh:NAME``: the request, the store's mesh entries, the job's
architecture, the worker's mesh path (slurm_plugin.modes.mesh_job), the files and report it
writes, the TaskProlog's RANKMAP_PARTITION and every fallback.

The report's numbers are checked against brute-force counts over the mesh's edges
with the ranks read back from the job's own files (partition + rankfile), not against
the library's metrics.
"""

from __future__ import annotations

import json
import os
import re
import sys
import types

import numpy as np
import pytest

from mapper import CommGraph
from mapper.io.mesh_file import write_mesh_metis
from mapper.io.mtx_file import write_mtx
from mapper.mesh import method_names as mesh_names
from mapper.mesh.mesh import mesh_from_graph
from mapper.mesh.metrics import evaluate_partition
from slurm_plugin.common.job_conventions import COMPUTED_FILES, EXPORTS, FILE_NAMES, PARTITION_FILE
from slurm_plugin.lifecycle.prolog import worker_request
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.machine.distribution import parse_distribution, slurm_placement
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes import mesh_job
from slurm_plugin.modes.mesh_job import (
    BASELINE,
    RANKMAP,
    MeshInput,
    MeshJobError,
    MeshSpec,
    default_method,
    job_architecture,
    load_mesh_input,
    parse_mesh_spec,
    plan_mesh,
    qpl_link_costs,
)
from slurm_plugin.outputs.render import core_list
from slurm_plugin.profiles.store import ProfileError, ProfileStore
from slurm_plugin.site.config import parse_config
from slurm_plugin.site.request import decide
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.paths import REPO
from tests.helpers.worker_harness import compute_into, job_request

TWO_SWITCHES = ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\n"
                "SwitchName=top Switches=s[1-2]\n")
DISTANCES = [1, 10, 100, 1000]


def layout_of(nodes: int = 4, tasks: int = 4, topology: str | None = TWO_SWITCHES):
    names = tuple(f"n{i + 1}" for i in range(nodes))
    tree = parse_topology_conf(topology) if topology else None
    return build_layout(Allocation("7", names, (tasks,) * nodes), NodeShape(2, 2, 1), tree,
                        DISTANCES)


def grid_mesh(rows: int = 12, cols: int = 12, weights: bool = False):
    """A rows x cols 4-neighbour grid; with ``weights`` w(v) = 1 + (v % 3), c(v) = 2."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    u = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    v = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    g = CommGraph.from_edges(u, v, np.ones(len(u)), n=rows * cols)
    if not weights:
        return mesh_from_graph(g)
    n = rows * cols
    return mesh_from_graph(g, 1.0 + np.arange(n) % 3, np.full(n, 2.0))


def mesh_input(mesh, spec: str = "mesh:grid") -> MeshInput:
    return MeshInput(mesh, parse_mesh_spec(spec), "/store/grid.toml")


# -- brute force from the job's files ------------------------------------------------------

def read_partition(text: str) -> np.ndarray:
    return np.array([int(line) for line in text.splitlines()])


def rankfile_slots(text: str) -> list[tuple[str, int, str]]:
    rows = re.findall(r"^rank (\d+)=(\S+) slot=(\d+):(\S+)$", text, re.M)
    assert [int(r) for r, *_ in rows] == list(range(len(rows)))
    return [(h, int(s), c) for _, h, s, c in rows]


def brute_cut_and_volume(mesh, part) -> tuple[float, float]:
    """Edge cut (each edge once) and total volume (Σ_v c(v) x #other parts next to v)
    by a loop over the vertices."""
    g = mesh.graph
    cut = vol = 0.0
    for v in range(mesh.n):
        nbrs = g.indices[g.indptr[v]:g.indptr[v + 1]]
        w = g.weights[g.indptr[v]:g.indptr[v + 1]]
        cut += sum(wt for u, wt in zip(nbrs, w, strict=True) if u > v and part[u] != part[v])
        vol += mesh.comm_sizes[v] * len({int(part[u]) for u in nbrs} - {int(part[v])})
    return cut, vol


# -- the request -------------------------------------------------------------------------

def spank(profile=None, mode=None):
    env = {}
    if profile is not None:
        env["SPANK_RANKMAP_COMM_PROFILE"] = profile
    if mode is not None:
        env["SPANK_RANKMAP_MODE"] = mode
    return env


@pytest.mark.parametrize("mode, algorithm", [(None, "fast"), ("auto", "fast"),
                                             ("greedy+n2", "greedy+n2")])
def test_a_mesh_request_keeps_the_mapping_algorithm(mode, algorithm):
    req = decide(parse_config("", "t.toml"), spank("mesh:plate,method=rb", mode), "debug")
    assert (req.profile, req.algorithm, req.refusal) == ("mesh:plate,method=rb", algorithm,
                                                         None)


@pytest.mark.parametrize("profile, mode, why", [
    ("mesh:plate", "summa", "not a SUMMA partition"),
    ("mesh:", None, "give the store entry of the mesh"),
    ("mesh:,method=rb", "auto", "give the store entry of the mesh"),
])
def test_bad_mesh_requests_are_refused(profile, mode, why):
    req = decide(parse_config("", "t.toml"), spank(profile, mode), "debug")
    assert req is not None and why in req.refusal


def test_a_rule_may_name_a_mesh():
    cfg = parse_config('[[rules]]\npartition = "cfd"\nprofile = "mesh:plate"\n', "t.toml")
    req = decide(cfg, {}, "cfd")
    assert (req.profile, req.origin, req.refusal) == ("mesh:plate", "rule", None)


def test_spec_grammar():
    assert parse_mesh_spec("mesh:plate") == MeshSpec("plate", None, 0.03)
    assert parse_mesh_spec(" mesh:p-1.v2 , method=rb,epsilon=0.05") == \
        MeshSpec("p-1.v2", "rb", 0.05)
    for bad, msg in (("mesh:a/b", "store name"), ("mesh:..x", "store name"),
                     ("mesh:p,method=metis", "method='metis': expected one of rb, rms"),
                     ("mesh:p,epsilon=1", r"epsilon='1'.*\[0, 1\)"),
                     ("mesh:p,epsilon=x", "epsilon='x'"), ("mesh:p,size=3", "unknown option"),
                     ("mesh:p,fast", "expected OPTION=VALUE"), ("plate", "not a mesh profile")):
        with pytest.raises(MeshJobError, match=msg):
            parse_mesh_spec(bad)


# -- the store ------------------------------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    """A store with a METIS mesh (its own weights), an .mtx mesh with a weights file and
    a communication profile."""
    s = tmp_path / "store"
    s.mkdir()
    mesh = grid_mesh(12, 12, weights=True)
    write_mesh_metis(mesh, s / "plate.graph")
    (s / "plate.toml").write_text('kind = "mesh"\ndescription = "plate"\nfile = "plate.graph"\n')
    write_mtx(mesh.graph, s / "grid.mtx")
    (s / "grid.weights").write_text("# w c\n" + "".join(f"{1 + v % 3} 2\n" for v in range(144)))
    (s / "grid.toml").write_text('kind = "mesh"\nfile = "grid.mtx"\nweights = "grid.weights"\n')
    write_mtx(CommGraph.from_edges([0], [1], [5.0], n=16), s / "comm.mtx")
    (s / "comm.toml").write_text('ranks = 16\nfile = "comm.mtx"\n')
    return types.SimpleNamespace(dir=s, mesh=mesh)


def test_mesh_entries_read_with_their_weights(store):
    st = ProfileStore([store.dir])
    for name in ("plate", "grid"):
        mesh, info = st.load_mesh(name)
        assert info.is_mesh and info.ranks == 0 and mesh.n == 144
        np.testing.assert_array_equal(mesh.vertex_weights, store.mesh.vertex_weights)
        np.testing.assert_array_equal(mesh.comm_sizes, store.mesh.comm_sizes)
    assert st.find("grid").weights == store.dir / "grid.weights"
    assert not st.find("comm").is_mesh
    data = load_mesh_input("mesh:grid,method=rb", [store.dir])
    assert data.mesh.n == 144 and data.spec == MeshSpec("grid", "rb", 0.03)
    assert data.entry == str(store.dir / "grid.toml")


def test_a_mesh_is_not_a_profile_and_a_profile_not_a_mesh(store):
    st = ProfileStore([store.dir])
    with pytest.raises(ProfileError, match=r"is a mesh .*--comm-profile=mesh:plate"):
        st.load("plate", 16)
    with pytest.raises(ProfileError, match="communication profile of 16 ranks, not a mesh"):
        st.load_mesh("comm")


@pytest.mark.parametrize("toml, msg", [
    ('kind = "mesh"\nranks = 4\nfile = "plate.graph"\n', "a mesh has no rank count"),
    ('kind = "cube"\nfile = "plate.graph"\n', "kind: 'cube' is not one of graph, mesh"),
    ('ranks = 4\nfile = "comm.mtx"\nweights = "grid.weights"\n', "only a mesh entry"),
    ('kind = "mesh"\nfile = "plate.graph"\nweights = "../x"\n', "weights: must be a path inside"),
    ('kind = "mesh"\n', "missing key 'file'"),
])
def test_bad_mesh_entries_name_the_toml(store, toml, msg):
    (store.dir / "bad.toml").write_text(toml)
    with pytest.raises(ProfileError, match=msg):
        ProfileStore([store.dir]).find("bad")
    assert "bad" in [name for name, _, _ in ProfileStore([store.dir]).scan()[1]]


def test_mesh_files_follow_the_size_limit(store):
    with pytest.raises(ProfileError, match="plate"):
        ProfileStore([store.dir], max_bytes=100).load_mesh("plate")


# -- the machine ----------------------------------------------------------------------------

def test_link_costs_make_the_qpl_equal_the_level_distances():
    """On the job's tree, e*(p, q) = the distance of the level p and q first share:
    by hand, PE 0 of n1 (2 sockets x 2 cores): PE 1 same socket 1, PEs 2-3 other
    socket 10, n2 (same switch) 100, n3-n4 (other switch) 1000."""
    lay = layout_of()
    np.testing.assert_allclose(qpl_link_costs(lay), [1, 10, np.sqrt(50), np.sqrt(450)])
    e = job_architecture(lay).pair_cost(np.zeros(16, dtype=int), np.arange(16))
    np.testing.assert_allclose(e, [0, 1, 10, 10] + [100] * 4 + [1000] * 8)


def test_speeds_and_linkspeed_reach_the_architecture():
    """[speeds] by node → every PE of the node; LinkSpeed of s2 half of s1's → the
    links into s2 cost twice their level's: e*(n3, n4) = 2 x (2 sqrt(50))^2 = 400, and
    n1 → n3 = c1^2 + c_top^2 + c_top^2 + (2 c1)^2 = 50 + 450 + 450 + 200 = 1150."""
    tree = parse_topology_conf("SwitchName=s1 Nodes=n[1-2] LinkSpeed=200\n"
                               "SwitchName=s2 Nodes=n[3-4] LinkSpeed=100\n"
                               "SwitchName=top Switches=s[1-2]\n")
    lay = build_layout(Allocation("7", ("n1", "n2", "n3", "n4"), (4,) * 4),
                       NodeShape(2, 2, 1), tree, DISTANCES)
    arch = job_architecture(lay, {"n2": 2.0, "n4": 0.5}, tree)
    assert arch.speeds.tolist() == [1.0] * 4 + [2.0] * 4 + [1.0] * 4 + [0.5] * 4
    e = arch.pair_cost([0, 8, 0], [4, 12, 8])
    np.testing.assert_allclose(e, [100, 400, 1150])


def test_default_method_follows_the_speeds():
    assert default_method(np.ones(8)) == mesh_names.RMS
    assert default_method(np.r_[np.ones(4), 2 * np.ones(4)]) == mesh_names.ARCHAWARE_ELT_SPARSE


# -- the plan ---------------------------------------------------------------------------------

def check_files(plan, lay, mesh, arch) -> np.ndarray:
    """partition: one line per vertex, values 0..P-1, every rank owns vertices; the
    rankfile puts rank r where the chosen placement says; the vertices on the PEs the
    two files give together have the MaxElTime and J of the applied row of the report.
    Returns the partition."""
    part = read_partition(plan.files[PARTITION_FILE])
    assert len(part) == mesh.n and set(part.tolist()) == set(range(lay.n))
    slots = rankfile_slots(plan.files["rankfile"])
    assert len(slots) == lay.n
    slot_index = {(s.host, s.socket, core_list(s.cores)): i for i, s in enumerate(lay.slots)}
    pe_of_rank = np.array([slot_index[row] for row in slots])
    np.testing.assert_array_equal(pe_of_rank, plan.result.chosen.placement)
    applied = next(d for d in json.loads(plan.report_json)["mesh"]["decompositions"]
                   if d["applied"])
    again = evaluate_partition(mesh, pe_of_rank[part], arch, hierarchy=lay.hierarchy)
    assert (again.max_el_time, again.objective) == pytest.approx(
        (applied["max_el_time"], applied["objective"]))
    return part


def test_homogeneous_plan_files_and_report_match_brute_force():
    lay, mesh = layout_of(), grid_mesh(16, 16, weights=True)
    arch = job_architecture(lay)
    plan = plan_mesh(lay, mesh_input(mesh), arch, job_id="7", profile="mesh:grid")
    assert plan.applied
    part = check_files(plan, lay, mesh, arch)
    record = json.loads(plan.report_json)
    m = record["mesh"]
    assert m["method"] == "rms" and m["vertices"] == 256 and m["criterion"] == "objective"
    assert [d["name"] for d in m["decompositions"]] == [RANKMAP, BASELINE]
    chosen = next(d for d in m["decompositions"] if d["applied"])
    assert m["chosen"] == chosen["name"] == plan.result.chosen.name
    assert chosen["objective"] == min(d["objective"] for d in m["decompositions"])
    # edge cut and volume do not depend on where the ranks run: the files' own ranks
    assert (chosen["edge_cut"], chosen["total_volume"]) == pytest.approx(
        brute_cut_and_volume(mesh, part))
    # block weights within epsilon of equal shares (equal speeds)
    loads = np.bincount(part, weights=mesh.vertex_weights, minlength=16)
    assert loads.max() <= 1.03 * mesh.total_weight / 16 + mesh.vertex_weights.max()
    for key in ("partition", "map", "evaluate", "baseline", "render", "total", "read"):
        assert key in m["seconds"], m["seconds"]
    for word in ("MaxElTime", "SumElTime", "volume", "edge cut", "metis+block", "time "):
        assert word in plan.report_text
    assert plan.summary.startswith(("mesh partition applied: J", "mesh partition written"))


def test_heterogeneous_plan_uses_elts_and_beats_or_equals_the_baseline():
    lay, mesh = layout_of(), grid_mesh(24, 24)
    arch = job_architecture(lay, {"n1": 2.0, "n2": 2.0})
    plan = plan_mesh(lay, mesh_input(mesh), arch, job_id="7", profile="mesh:grid")
    record = json.loads(plan.report_json)["mesh"]
    assert record["method"] == mesh_names.ARCHAWARE_ELT_SPARSE
    assert record["speeds"]["nodes"] == {"1": "n[3-4]", "2": "n[1-2]"}
    assert record["criterion"] == "max_el_time"
    ours, base = record["decompositions"]
    applied = ours if ours["applied"] else base
    assert applied["max_el_time"] == min(ours["max_el_time"], base["max_el_time"])
    check_files(plan, lay, mesh, arch)


def test_the_baseline_wins_when_it_is_better(monkeypatch):
    """A decomposition scrambled on purpose loses to METIS + block: the job gets the
    baseline's partition (METIS's part r for rank r) at Slurm's own placement."""
    real = mesh_job.decompose

    def scrambled(mesh, hierarchy, arch, **kwargs):
        dec = real(mesh, hierarchy, arch, **kwargs)
        part = np.random.default_rng(0).permutation(dec.part)
        metrics = evaluate_partition(mesh, dec.placement[part], arch, hierarchy=hierarchy)
        return type(dec)(**{**dec.__dict__, "part": part, "metrics": metrics})

    monkeypatch.setattr(mesh_job, "decompose", scrambled)
    lay, mesh = layout_of(), grid_mesh(16, 16)
    arch = job_architecture(lay)
    plan = plan_mesh(lay, mesh_input(mesh), arch, distribution=parse_distribution("cyclic"))
    assert plan.applied and plan.result.chosen.name == BASELINE
    np.testing.assert_array_equal(plan.result.chosen.placement,
                                  slurm_placement(lay, parse_distribution("cyclic")))
    check_files(plan, lay, mesh, arch)
    assert plan.summary.startswith("mesh partition written: METIS k-way")


def test_plan_failures_give_a_report_without_files():
    lay = layout_of()
    plan = plan_mesh(lay, mesh_input(grid_mesh(3, 3)), job_architecture(lay))
    assert not plan.applied and plan.files == {}
    assert "fewer" in plan.fallback_reason or "vertices" in plan.fallback_reason
    assert "gets no partition" in plan.report_text
    plan = plan_mesh(lay, None, None, fallback_reason="refused")
    assert json.loads(plan.report_json)["fallback_reason"] == "refused"


def test_a_decomposition_over_the_budget_falls_back():
    ticks = iter(range(0, 1000, 10))  # every clock reading 10 s later
    lay = layout_of()
    plan = plan_mesh(lay, mesh_input(grid_mesh(8, 8)), job_architecture(lay), time_limit=5,
                     clock=lambda: next(ticks))
    assert not plan.applied and plan.files == {}
    assert "over its time budget of 5 s" in plan.fallback_reason


# -- the worker, the TaskProlog and the prolog ----------------------------------------------

@pytest.fixture
def job(tmp_path, monkeypatch, store):
    """A 16-task job on 4 nodes under 2 switches (pyslurm stand-in), a store with the
    meshes, and the worker's environment."""
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())
    (tmp_path / "topology.conf").write_text(TWO_SWITCHES)
    out = tmp_path / "out"
    (out / "job.42").mkdir(parents=True)
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                      f'[slurm]\nbackend = "pyslurm"\ntopology = "{tmp_path}/topology.conf"\n'
                      f'[profiles]\nstores = ["{store.dir}"]\n')
    env = {"RANKMAP_CONFIG": str(config), "RANKMAP_JOB_DIR": str(out / "job.42"),
           "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
    return types.SimpleNamespace(tmp=tmp_path, out=out, dir=out / "job.42", env=env,
                                 request=job_request("mesh:grid"), config=config,
                                 store=store)


def task_exports(job) -> list[str]:
    return exports({"SLURM_JOB_ID": "42", "RANKMAP_CONFIG": str(job.config)})


def test_worker_writes_partition_rankfile_and_report(job):
    result = compute_into(job.env, job.request)
    assert result["applied"] and result["n"] == 16 and result["reason"] is None
    assert sorted(os.listdir(job.dir)) == sorted([
        "partition", "rankfile", "hostfile", "machinefile", "slurm_hostfile", "bindings",
        "hydra_hostfile", "hydra_rankmap",
        "report.txt",
        "report.json"])
    part = read_partition((job.dir / "partition").read_text())
    assert len(part) == 144 and set(part.tolist()) == set(range(16))
    record = json.loads((job.dir / "report.json").read_text())
    assert record["applied"] and record["mesh"]["entry"] == str(job.store.dir / "grid.toml")
    assert record["mesh"]["speeds"]["source"] == "equal speeds (no [speeds])"
    chosen = next(d for d in record["mesh"]["decompositions"] if d["applied"])
    assert (chosen["edge_cut"], chosen["total_volume"]) == pytest.approx(
        brute_cut_and_volume(job.store.mesh, part))
    assert result["objective"] == pytest.approx(chosen["max_el_time"])


def test_worker_takes_speeds_from_the_config(job):
    job.config.write_text(job.config.read_text() + '[speeds]\nnodes = { "n[3-4]" = 3.0 }\n')
    assert compute_into(job.env, job.request)["applied"]
    record = json.loads((job.dir / "report.json").read_text())
    assert record["mesh"]["method"] == mesh_names.ARCHAWARE_ELT_SPARSE
    assert record["mesh"]["speeds"]["nodes"] == {"1": "n[1-2]", "3": "n[3-4]"}
    assert record["mesh"]["speeds"]["source"] == f"[speeds] of {job.config}"


def test_task_prolog_exports_the_partition(job):
    compute_into(job.env, job.request)
    lines = task_exports(job)
    assert f"export RANKMAP_PARTITION={job.dir / 'partition'}" in lines
    assert f"export RANKMAP_RANKFILE={job.dir / 'rankfile'}" in lines
    assert any(ln.startswith("print rankmap: mesh partition") for ln in lines), lines
    assert EXPORTS[PARTITION_FILE] == "RANKMAP_PARTITION"
    assert FILE_NAMES[PARTITION_FILE] == "partition" and PARTITION_FILE in COMPUTED_FILES


def fallback_of(job, request=None) -> str:
    result = compute_into(job.env, request or job.request)
    assert not result["applied"] and result["reason"]
    assert sorted(os.listdir(job.dir)) == ["report.json", "report.txt"]
    record = json.loads((job.dir / "report.json").read_text())
    assert record["applied"] is False and record["fallback_reason"] == result["reason"]
    assert "rankmap was NOT applied" in (job.dir / "report.txt").read_text()
    lines = task_exports(job)
    assert not any("RANKMAP_PARTITION" in ln or "RANKFILE" in ln for ln in lines), lines
    return result["reason"]


def test_malformed_weights_fall_back_naming_file_and_line(job):
    w = job.store.dir / "grid.weights"
    w.write_text(w.read_text().replace("3 2\n", "3 -2\n", 1))  # vertex 3 on line 4
    assert fallback_of(job) == (f"profile 'grid': {w}:4: communication size -2 of vertex 3; "
                                f"must be finite and >= 0")


def test_missing_mesh_file_falls_back_naming_the_entry(job):
    (job.store.dir / "grid.mtx").unlink()
    reason = fallback_of(job)
    assert f"{job.store.dir / 'grid.toml'}: file 'grid.mtx' is missing" in reason


def test_unknown_entry_and_bad_options_fall_back(job):
    assert "profile 'nope' not found" in fallback_of(job, job_request("mesh:nope"))
    assert "unknown option 'size'" in fallback_of(job, job_request("mesh:grid,size=2"))


def test_refused_request_falls_back_with_its_reason(job):
    req = decide(parse_config("", "t.toml"), spank("mesh:grid", "summa"), "debug")
    reason = fallback_of(job, worker_request("42", req))
    assert "not a SUMMA partition" in reason


def test_feature_speeds_ask_slurm_for_the_features(job, monkeypatch):
    job.config.write_text(job.config.read_text() + "[speeds]\nfeatures = { fast = 2.0 }\n")
    asked = []

    def fake_run(args, timeout=10.0, env=None, **_):
        asked.append(args)
        return "".join(f"NodeName=n{i} ActiveFeatures={'fast' if i == 1 else '(null)'}\n"
                       for i in range(1, 5))

    from slurm_plugin.slurm import cli_backend

    monkeypatch.setattr(cli_backend, "run_slurm", fake_run)
    assert compute_into(job.env, job.request)["applied"]
    assert asked == [["scontrol", "show", "node", "-o", "n1,n2,n3,n4"]]
    record = json.loads((job.dir / "report.json").read_text())
    assert record["mesh"]["speeds"]["nodes"] == {"1": "n[2-4]", "2": "n1"}


def test_jobdir_removes_the_partition_with_the_launcher_files(tmp_path):
    from slurm_plugin.common.jobdir import create_job_dir

    jd = create_job_dir(tmp_path, "5")
    jd.write({PARTITION_FILE: "0\n", "rankfile": "x"})
    jd.remove_launcher_files()
    assert not jd.is_file(PARTITION_FILE) and not jd.is_file("rankfile")


def test_the_store_docstring_documents_the_keys():
    doc = REPO / "slurm_plugin/profiles/store.py"
    text = doc.read_text()
    assert 'kind = "mesh"' in text and "weights = " in text
