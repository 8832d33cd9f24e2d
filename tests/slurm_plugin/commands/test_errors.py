"""One error hierarchy: user errors are RankmapError (one line, exit 2), bugs keep their
traceback; nothing is swallowed."""

import importlib
import inspect
import logging

import numpy as np
import pytest
import tomllib

from mapper.errors import RankmapError
from slurm_plugin.commands.cli import main

MODULES = ["mapper.model.graph", "mapper.io.graph_format", "mapper.model.machine",
           "mapper.objectives.qap",
           "mapper.solve.api", "mapper.io.mapping_file", "mapper.io.distance_matrix_file",
           "slurm_plugin.commands.args", "slurm_plugin.site.config",
           "slurm_plugin.slurm.allocation", "slurm_plugin.slurm.backends",
           "slurm_plugin.slurm.topology", "slurm_plugin.common.hostlist",
           "slurm_plugin.machine.hwloc", "slurm_plugin.common.jobdir",
           "slurm_plugin.slurm.slurm_commands", "slurm_plugin.machine.distribution",
           "slurm_plugin.profiles.store", "slurm_plugin.profiles.generators",
           "slurm_plugin.profiles.ompi_monitoring", "slurm_plugin.profiles.smpi_ti",
           "slurm_plugin.profiles.collectives", "slurm_plugin.profiles.recording",
           "slurm_plugin.machine.layout", "slurm_plugin.machine.speeds", "mapper.mesh.mesh",
           "mapper.io.mesh_file", "mapper.mesh.architecture", "mapper.mesh.result",
           "mapper.mesh.balance", "mapper.mesh.archaware", "mapper.io.arity_file",
           "mapper.io.summa_files", "mapper.partitioners.errors"]


def test_every_error_class_is_a_rankmap_error():
    for name in MODULES:
        for cls_name, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass):
            if cls_name.endswith("Error") and cls.__module__ == name:
                assert issubclass(cls, RankmapError), f"{name}.{cls_name}"


@pytest.mark.parametrize("args, msg", [
    (["--cpus-per-task", "0"], "--cpus-per-task: must be at least 1"),
    (["--time-limit", "0"], "--time-limit: must be a positive number"),
    (["--time-limit", "nan"], "--time-limit: must be a positive number"),
])
def test_plan_refuses_zero_by_name(tmp_path, capsys, args, msg):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--out", str(tmp_path), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_user_error_is_one_line_exit_2(tmp_path, capsys):
    assert main(["plan", "--out", str(tmp_path), "--profile", "nosuch-profile"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rankmap: error:") and "not found" in err and err.count("\n") == 1


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    # plan computes through the prolog's worker (job_worker.compute_job), which runs
    # the graph mode's make_plan
    import slurm_plugin.modes.graph_job as graph_job

    def broken(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(graph_job, "make_plan", broken)
    with pytest.raises(ZeroDivisionError):
        main(["plan", "--out", str(tmp_path)])


def test_metis_failure_is_logged_not_silent(monkeypatch, caplog):
    import scipy.sparse as sp

    from mapper.partitioners import metis

    def refuse(*a, **k):
        raise RuntimeError("METIS_ERROR_INPUT")

    monkeypatch.setattr(metis.pymetis, "part_graph", refuse)
    adj = sp.csr_matrix(np.ones((6, 6)) - np.eye(6))
    with caplog.at_level(logging.WARNING, logger="rankmap.mapper"):
        parts = metis._metis(adj, np.array([3, 3]), 0, True)
    assert sorted(np.bincount(parts).tolist()) == [3, 3]
    assert "METIS failed" in caplog.text and "METIS_ERROR_INPUT" in caplog.text


def test_profile_list_shows_broken_profiles_with_the_reason(tmp_path, capsys):
    (tmp_path / "good.toml").write_text('ranks = 2\nfile = "good.mtx"\n')
    (tmp_path / "good.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                       "2 2 1\n1 2 5\n")
    (tmp_path / "bad.toml").write_text('ranks = "two"\nfile = "bad.mtx"\n')
    assert main(["profile", "list", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "good" in out
    assert "bad" in out and "BROKEN" in out and "ranks: must be int" in out


def test_profile_import_writes_valid_toml_for_any_description(tmp_path):
    from slurm_plugin.profiles.store import ProfileStore

    prof = tmp_path / "prof"
    for rank in (0, 1):
        line = f"E\t{rank}\t{1 - rank}\t100 bytes\t1 msgs sent\n"
        (tmp_path / f"prof.{rank}.prof").write_text(line)
    desc = 'tab\there, back\\slash, "quotes"\nnewline \x7f'
    store = tmp_path / "store"
    assert main(["profile", "import", str(prof), "--name", "p", "--store", str(store),
                 "--description", desc]) == 0
    data = tomllib.loads((store / "p.toml").read_text())
    assert data["description"] == desc
    assert ProfileStore([store]).find("p").description == desc


def test_an_error_quoting_a_name_reaches_the_terminal_without_its_escapes(tmp_path, capsys):
    """A file name (or file text) with terminal escapes in an error message: printed as
    visible escapes, line by line, so it cannot clear the screen or retitle it."""
    from slurm_plugin.commands.cli import main

    bad = tmp_path / "x\x1b[2J\x07y.toml"
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err == f"rankmap: error: {tmp_path}/x\\x1b[2J\\x07y.toml: no such file\n"
