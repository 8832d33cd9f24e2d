"""The job modes (issue 30): one interface, one registry, one path through the worker.

The request's mode is decided once (slurm_plugin.site.request); the registry gives the
mode of that name; :func:`slurm_plugin.lifecycle.job_worker.compute_job` runs every mode
the same way (load, machine, plan).  Each mode is run here on a 16-task layout and must
write its own files: the graph mode a rankfile and the reorder files, the mesh mode a
partition, the summa mode an arrangement.
"""

from __future__ import annotations

import pytest

from mapper import MappingResult
from mapper.io.mesh_file import write_mesh_metis
from mapper.io.mtx_file import write_mtx
from mapper.summa.arrange import Arrangement
from slurm_plugin.common.job_conventions import (
    ARRANGEMENT_FILE,
    GRAPH_MODE,
    JOB_MODES,
    MESH_MODE,
    PARTITION_FILE,
    SUMMA_MODE,
)
from slurm_plugin.lifecycle.job_worker import compute_job
from slurm_plugin.modes import registry
from slurm_plugin.modes.base import Job, JobPlan, ModeSettings
from slurm_plugin.modes.graph_job import GraphMode
from slurm_plugin.modes.mesh_job import MeshMode, MeshResult
from slurm_plugin.modes.summa_job import SummaMode
from slurm_plugin.site.config import parse_config
from slurm_plugin.site.request import request_for
from tests.slurm_plugin.commands.test_plan_like_prolog import scrambled_stencil
from tests.slurm_plugin.modes.test_mesh_job import grid_mesh, layout_of

KINDS = {GRAPH_MODE: GraphMode, MESH_MODE: MeshMode, SUMMA_MODE: SummaMode}


def test_every_mode_name_has_its_mode():
    assert tuple(registry.MODES) == JOB_MODES
    for name in JOB_MODES:
        mode = registry.job_mode(name)
        assert isinstance(mode, KINDS[name]) and mode.name == name
    with pytest.raises(ValueError, match="unknown job mode 'reorder'"):
        registry.job_mode("reorder")


@pytest.mark.parametrize("profile, rankmap, mode, algorithm, refused", [
    ("lammps-3d", None, GRAPH_MODE, "topdown+n10", None),
    ("file:/x/y.mtx", "greedy", GRAPH_MODE, "greedy", None),
    ("mesh:plate", None, MESH_MODE, "topdown+n10", None),
    ("mesh:plate,method=rb", "auto", MESH_MODE, "topdown+n10", None),
    ("summa-fpm", None, SUMMA_MODE, "summa", None),
    ("summa-fpm:fast,size=64", "auto", SUMMA_MODE, "summa", None),
    # refused pairs keep the mode whose report they get
    ("stencil3d", "summa", SUMMA_MODE, "summa", "needs --comm-profile=summa-fpm"),
    ("mesh:plate", "summa", MESH_MODE, "summa", "is a mesh to partition"),
    ("summa-fpm", "topdown", GRAPH_MODE, "topdown", "is a SUMMA partition"),
])
def test_the_request_decides_the_mode_once(profile, rankmap, mode, algorithm, refused):
    request = request_for(profile, rankmap, "topdown+n10", 5.0)
    assert (request.mode, request.algorithm) == (mode, algorithm)
    assert (request.refusal is None) if refused is None else (refused in request.refusal)


@pytest.fixture
def site(tmp_path):
    """A store with a communication profile, a mesh and a speeds file for 16 ranks."""
    store = tmp_path / "store"
    store.mkdir()
    write_mtx(scrambled_stencil(), store / "scrambled.mtx")
    (store / "scrambled.toml").write_text('ranks = 16\nfile = "scrambled.mtx"\n')
    write_mesh_metis(grid_mesh(12, 12, weights=True), store / "plate.graph")
    (store / "plate.toml").write_text('kind = "mesh"\nfile = "plate.graph"\n')
    (store / "two-kinds.speeds").write_text("".join(f"{1 + (r % 4 == 0)}\n"
                                                    for r in range(16)))
    return parse_config("", "t.toml"), (str(store),)


def job_of(site, profile: str, algorithm: str = "topdown+n10") -> tuple[Job, str]:
    cfg, stores = site
    request = request_for(profile, algorithm, algorithm, 5.0)
    layout = layout_of()
    return Job(layout, None, ModeSettings.of(cfg), request.profile, request.algorithm,
               request.time_limit,
               stores=stores, allow_user_files=False, job_id="7"), request.mode


@pytest.mark.parametrize("profile, algorithm, mode, own_files, result_type", [
    ("scrambled", "topdown+n10", GRAPH_MODE, {"rankfile", "reorder.block", "dist_graph"},
     MappingResult),
    ("mesh:plate", "topdown+n10", MESH_MODE, {PARTITION_FILE, "rankfile"}, MeshResult),
    ("summa-fpm:two-kinds,size=256", "summa", SUMMA_MODE, {ARRANGEMENT_FILE, "rankfile"},
     Arrangement),
])
def test_the_worker_routes_each_mode_to_its_files(site, profile, algorithm, mode,
                                                  own_files, result_type):
    job, asked = job_of(site, profile, algorithm)
    assert asked == mode
    out = compute_job(job, mode)
    assert out.status.applied and out.status.reason is None, out.status
    assert own_files <= set(out.files), sorted(out.files)
    others = {PARTITION_FILE, ARRANGEMENT_FILE, "reorder.block"} - own_files
    assert not others & set(out.files), sorted(out.files)
    assert list(out.files)[-2:] == ["report", "report_json"]  # the report last
    assert isinstance(out.plan, JobPlan) and isinstance(out.plan.result, result_type)
    assert out.status.n == 16 and out.status.objective == out.plan.objective
    assert set(out.timings) >= {"profile"}


class Recorder:
    """A mode that records what the worker asks of it."""

    name = "graph"

    def __init__(self, fail: str | None = None):
        self.calls: list[str] = []
        self.fail = fail

    def load(self, job):
        self.calls.append("load")
        if self.fail == "load":
            raise OSError("no such profile")
        return "data"

    def machine(self, job):
        self.calls.append("machine")
        if self.fail == "machine":
            raise OSError("no [network] file")
        return "machine"

    def plan(self, job, data, machine, reason):
        self.calls.append(f"plan {data} {machine} {reason}")
        return JobPlan(files={"rankfile": "r"} if reason is None else {},
                       report_text="text", report_record={}, fallback_reason=reason,
                       status_notes=("note",))


@pytest.mark.parametrize("refusal, fail, calls", [
    (None, None, ["load", "machine", "plan data machine None"]),
    (None, "load", ["load", "plan None None no such profile"]),
    (None, "machine", ["load", "machine", "plan data None no [network] file"]),
    ("not on this partition", None, ["plan None None not on this partition"]),
])
def test_one_path_loads_or_refuses_then_plans(site, monkeypatch, refusal, fail, calls):
    recorder = Recorder(fail)
    monkeypatch.setitem(registry.MODES, GRAPH_MODE, lambda: recorder)
    job, _ = job_of(site, "scrambled")
    out = compute_job(job, GRAPH_MODE, refusal)
    assert recorder.calls == calls
    assert out.status.applied == (calls[-1].endswith("None"))
    assert out.status.reason == (refusal or {"load": "no such profile",
                                             "machine": "no [network] file"}.get(fail))
    assert out.status.notes == ("note",)


def test_rankmap_plan_raises_what_the_worker_refuses_with(site, monkeypatch):
    recorder = Recorder("machine")
    monkeypatch.setitem(registry.MODES, GRAPH_MODE, lambda: recorder)
    job, _ = job_of(site, "scrambled")
    with pytest.raises(OSError, match=r"no \[network\] file"):
        compute_job(job, GRAPH_MODE, strict=True)
    assert recorder.calls == ["load", "machine"]


def test_modes_are_given_only_the_settings_they_read():
    """A mode's Job carries the sections modes read (solver, render, profiles, speeds,
    summa, the [network] table) and where they came from, not the whole configuration:
    the prolog's, Slurm's, the recorder's and the launchers' settings stay outside."""
    import dataclasses

    from slurm_plugin.site.config import parse_config

    cfg = parse_config('[solver]\nseed = 3\n[render]\nfiles = ["rankfile"]\n', "site.toml")
    settings = ModeSettings.of(cfg)
    names = {f.name for f in dataclasses.fields(settings)}
    assert names == {"solver", "render", "profiles", "speeds", "summa", "network", "path"}
    assert "cfg" not in {f.name for f in dataclasses.fields(Job)}
    assert settings.solver.seed == 3 and settings.render.files == ["rankfile"]
    assert settings.path == "site.toml" and settings.network is None
