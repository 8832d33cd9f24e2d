import functools
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mapper import Hierarchy, evaluate
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.machine.layout import Layout, Slot
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.outputs.render import (
    render_hostfile,
    render_machinefile,
    render_rankfile,
    render_slurm_hostfile,
)
from slurm_plugin.outputs.report import build_report, render_report_text, report_record
from slurm_plugin.profiles.generators import generate


def small_layout(cpt: int = 1) -> Layout:
    """2 hosts x 2 sockets x 2 slots of ``cpt`` cores each."""
    slots = []
    for host in ("a", "b"):
        for sock in (0, 1):
            for k in range(2):
                cores = tuple(range(k * cpt, (k + 1) * cpt))
                slots.append(Slot(host, sock, cores, tuple(sock * 4 + c for c in cores)))
    h = Hierarchy.from_tree([[2, 2], [2, 2]], [1, 10, 100], ["socket", "node", "root"])
    return Layout(h, tuple(slots))


def parse_rankfile(text: str) -> dict[int, tuple[str, int, str]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.fullmatch(r"rank (\d+)=(\S+) slot=(\d+):(\S+)", line)
        assert m, line
        out[int(m.group(1))] = (m.group(2), int(m.group(3)), m.group(4))
    return out


@pytest.mark.parametrize("cpt", [1, 2])
def test_every_rankfile_line_matches_the_mapping(cpt):
    layout = small_layout(cpt)
    mapping = np.random.default_rng(cpt).permutation(layout.n)
    parsed = parse_rankfile(render_rankfile(layout, mapping))
    assert sorted(parsed) == list(range(layout.n))
    for rank, (host, sock, cores) in parsed.items():
        slot = layout.slots[mapping[rank]]
        expect = ",".join(map(str, slot.cores)) if len(slot.cores) == 1 else \
            f"{slot.cores[0]}-{slot.cores[-1]}"
        assert (host, sock, cores) == (slot.host, slot.socket, expect)


def test_hostfile_machinefile_and_slurm_hostfile():
    layout = small_layout()
    mapping = np.array([7, 0, 6, 1, 2, 3, 4, 5])
    hostfile = render_hostfile(layout, mapping).split("\n")
    assert hostfile[:2] == ["b slots=4", "a slots=4"]
    expected = [layout.slots[p].host for p in mapping]
    assert render_machinefile(layout, mapping).split() == expected
    assert render_slurm_hostfile(layout, mapping).split() == expected


#: site templates that loop over ``ranks`` (the packaged ones print the ready-made ``lines``)
LOOPING = {
    "rankfile.j2": "# rankmap {{ algorithm }} placement for job {{ job_id }}\n"
                   "{% for r in ranks %}\nrank {{ r.rank }}={{ r.host }} slot={{ r.socket }}:"
                   "{{ r.cores }}\n{% endfor %}\n",
    "machinefile.j2": "{% for r in ranks %}\n{{ r.host }}\n{% endfor %}\n",
    "slurm_hostfile.j2": "{% for r in ranks %}\n{{ r.host }}\n{% endfor %}\n",
}


@pytest.mark.parametrize("cpt", [1, 2, 3])
def test_the_packaged_templates_equal_site_templates_that_loop_over_ranks(tmp_path, cpt):
    """Every launcher file goes through its template: the packaged per-rank ones print
    the lines built in Python, a site's may loop over ``ranks``; both give the same
    bytes (and a copy of the packaged templates in a site directory, too)."""
    from slurm_plugin.outputs.render import packaged_templates_dir

    layout = small_layout(cpt) if cpt < 3 else Layout(
        Hierarchy.from_tree([2, 1], [1, 10], ["socket", "node"]),
        (Slot("x", 0, (0, 2), (0, 2)), Slot("x", 0, (1,), (1,)), Slot("y", 1, (5, 6, 7), (5,))))
    looping, copied = tmp_path / "looping", tmp_path / "copied"
    looping.mkdir()
    copied.mkdir()
    for name, text in LOOPING.items():
        (looping / name).write_text(text)
    for name in ("rankfile.j2", "machinefile.j2", "slurm_hostfile.j2", "hostfile.j2"):
        shutil.copy(packaged_templates_dir() / name, copied / name)
    mapping = np.random.default_rng(cpt).permutation(layout.n)
    for render in (render_rankfile, render_machinefile, render_slurm_hostfile,
                   render_hostfile):
        packaged = render(layout, mapping, algorithm="topdown+n10", job_id="17")
        for site in (looping, copied):
            assert packaged == render(layout, mapping, templates_dir=str(site),
                                      algorithm="topdown+n10", job_id="17"), render.__name__
    assert render_rankfile(layout, mapping).count("\n") == layout.n + 1


def test_site_templates_override_single_files(tmp_path):
    (tmp_path / "hostfile.j2").write_text("{% for h in hosts %}{{ h.host }}:{{ h.slots }}\n"
                                          "{% endfor %}")
    layout = small_layout()
    site = str(tmp_path)
    assert render_hostfile(layout, np.arange(8), templates_dir=site) == "a:4\nb:4\n"
    # the templates the site does not have still come from the package
    assert render_machinefile(layout, np.arange(8), templates_dir=site) == \
        render_machinefile(layout, np.arange(8))
    assert render_machinefile(layout, np.arange(8), templates_dir=site).split()[0] == "a"
    packaged = render_rankfile(layout, np.arange(8), job_id="7")
    assert render_rankfile(layout, np.arange(8), templates_dir=site, job_id="7") == packaged
    assert packaged.startswith("# rankmap rankmap placement for job 7\n")
    # a site template can wrap the packaged one of the same name
    (tmp_path / "wrap").mkdir()
    (tmp_path / "wrap" / "rankfile.j2").write_text(
        '# site header\n{% include "packaged/rankfile.j2" %}')
    wrapped = render_rankfile(layout, np.arange(8), templates_dir=str(tmp_path / "wrap"),
                              job_id="7")
    assert wrapped == "# site header\n" + packaged


def test_report_numbers_match_the_mapper():
    layout = small_layout()
    graph = generate("ring", 8)
    plan = make_plan(layout, graph, algorithm="topdown+n2", time_limit=5, job_id="42",
                     profile="ring")
    assert plan.applied and set(plan.files) == {"rankfile", "hostfile", "machinefile",
                                                "slurm_hostfile", "bindings", "hydra_hostfile",
                                                "hydra_rankmap"}
    record = json.loads(plan.report_json)
    costs = {p["name"]: p for p in record["placements"]}
    for name, mapping in {"rankmap": plan.result.mapping, **default_placements(layout)}.items():
        ev = evaluate(graph, layout.hierarchy, mapping)
        assert costs[name]["objective"] == pytest.approx(ev.objective)
        assert costs[name]["traffic"] == {t.name: t.volume for t in ev.traffic}
    block, ours = costs["block"]["objective"], costs["rankmap"]["objective"]
    assert costs["rankmap"]["saved_vs_default"] == f"{100 * (block - ours) / block:.1f}%"
    assert costs["rankmap"]["applied"] and costs["block"]["default"]
    assert "rankmap was NOT applied" not in plan.report_text
    assert record["summary"].startswith("rankmap's placement applied")
    assert record["summary"] in plan.report_text


def test_block_already_optimal_keeps_the_default_and_renders_nothing():
    from mapper import CommGraph

    layout = small_layout()
    # Slurm's block:cyclic puts ranks 0, 2 on host a socket 0 and 1, 3 on socket 1:
    # pairs (0,2), (1,3), (4,6), (5,7) each share a socket, which is optimal
    pairs = CommGraph.from_edges([0, 1, 4, 5], [2, 3, 6, 7], [5.0] * 4, n=8)
    plan = make_plan(layout, pairs, algorithm="random", time_limit=5, profile="pairs")
    assert plan.kept_default and not plan.applied and plan.files == {}
    assert plan.fallback_reason is None
    record = json.loads(plan.report_json)
    assert [p["name"] for p in record["placements"] if p["applied"]] == ["block"]
    assert "block placement kept" in plan.report_text


def test_cyclic_default_placement_is_round_robin():
    layout = small_layout()
    cyclic = default_placements(layout)["cyclic"]
    assert [layout.slots[p].host for p in cyclic] == ["a", "b"] * 4
    assert sorted(cyclic.tolist()) == list(range(8))


def test_fallback_report_names_the_reason_and_renders_no_launcher_files():
    layout = small_layout()
    plan = make_plan(layout, generate("ring", 4), algorithm="topdown", time_limit=5,
                     profile="ring")
    assert not plan.applied and plan.files == {}
    assert "has 4 ranks but the job has 8 tasks" in plan.report_text
    rep = build_report(layout, None, None, job_id="1", profile="x", fallback_reason="broken")
    assert "rankmap was NOT applied: broken" in render_report_text(rep)
    assert report_record(rep)["applied"] is False


def test_time_budget_overrun_is_a_fallback():
    layout = small_layout()
    plan = make_plan(layout, generate("ring", 8), algorithm="topdown+n10", time_limit=1e-6)
    assert not plan.applied and "time budget" in plan.fallback_reason


@functools.cache
def open_mpi_version() -> tuple[int, ...] | None:
    """The version of the ``mpirun`` on PATH when it is Open MPI's (``mpirun (Open MPI)
    4.1.4``, ``5.0.7``), else None."""
    if not shutil.which("mpirun"):
        return None
    proc = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"\(Open MPI\) (\d+)\.(\d+)", proc.stdout + proc.stderr)
    return tuple(int(x) for x in found.groups()) if found else None


def rankfile_argv(path: str, version: tuple[int, ...]) -> list[str]:
    """How to give ``mpirun`` a rankfile: Open MPI 4.x ``--rankfile PATH`` (or the MCA
    parameter rmaps_rank_file_path); 5.x ``--map-by rankfile:file=PATH``, where it
    reports ``--rankfile`` as deprecated and ignores the MCA parameter."""
    return ["--map-by", f"rankfile:file={path}"] if version >= (5,) else ["--rankfile", path]


@pytest.mark.skipif(open_mpi_version() is None, reason="Open MPI's mpirun not installed")
def test_mpirun_accepts_a_rendered_rankfile():
    host = socket.gethostname()
    h = Hierarchy.from_tree([2], [1, 10], ["socket", "root"])
    layout = Layout(h, (Slot(host, 0, (0,), (0,)), Slot(host, 0, (1,), (1,))))
    # Open MPI 5.0.7 (Debian 13) rejects a rankfile path holding a '-' ("The map-by
    # directive contains an unrecognized qualifier: file=...", open-mpi/ompi#13545; a ':'
    # fails too), also given as --rankfile, and pytest's tmp_path always holds one
    # (/tmp/pytest-of-USER/): a directory of mkdtemp's (letters, digits, '_') in a
    # temporary directory without either
    base = tempfile.gettempdir()
    work = Path(tempfile.mkdtemp(prefix="rankmap_rf_", dir=base if "-" not in base
                                 and ":" not in base else "/tmp"))
    try:
        rf = work / "rankfile"
        rf.write_text(render_rankfile(layout, np.array([1, 0])))
        env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
               "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        proc = subprocess.run(["mpirun", *rankfile_argv(str(rf), open_mpi_version()), "-np",
                               "2", "--report-bindings", "/bin/true"],
                              env=env, capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(work)
    assert proc.returncode == 0, proc.stderr
    # 4.1: "MCW rank 0 bound to socket 0[core 1[hwt 0]]: [./B]"; 5.0: "Rank 0 bound to
    # package[0][core:1]"
    assert re.search(r"\brank 0 bound to (?:socket 0\[core 1\[|package\[0\]\[core:1\])",
                     proc.stderr, re.I), proc.stderr
