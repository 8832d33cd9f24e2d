"""Every failure path of the prolog logs the reason and leaves the job a report; every
user-controlled string is escaped on its way into root's log and the report (issue 14).

No Slurm: the computation (``run_worker``) is replaced where a test needs a given
outcome.
"""

import json
import os
import re
from pathlib import Path

import pytest

from slurm_plugin.common.safe_text import safe_text
from slurm_plugin.lifecycle import prolog
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.lifecycle.worker_protocol import WorkerStatus
from slurm_plugin.site.config import parse_config
from slurm_plugin.site.request import MappingRequest

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} rankmap\[\d+\] ")


@pytest.fixture(autouse=True)
def _restore_logging(restore_prolog_logging):
    """Every test here runs with the prolog's logger restored afterwards."""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A config file in tmp_path and the environment of the batch host's prolog."""
    out, fallback, log_file = tmp_path / "out", tmp_path / "fallback", tmp_path / "rankmap.log"
    out.mkdir()
    cfg_path = tmp_path / "rankmap.toml"
    cfg_path.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = "{log_file}"\n'
                        f'[prolog]\nfallback_dir = "{fallback}"\n')
    for key in list(os.environ):
        if key.startswith(("SLURM", "SPANK_")):
            monkeypatch.delenv(key)
    env = {"RANKMAP_CONFIG": str(cfg_path), "SLURM_JOB_ID": "61", "SLURM_NODELIST": "n1",
           "SLURMD_NODENAME": "n1", "SPANK_RANKMAP_COMM_PROFILE": "ring"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {"out": out, "fallback": fallback, "log": log_file, "config": cfg_path,
            "env": env}


def log_lines(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines
    return lines


# -- log forging (finding 5) ----------------------------------------------------------

def test_safe_text():
    assert safe_text("ring") == "ring"
    assert safe_text("a\nb\r\tc\x1b[31m\x00\x7f\u2028\u202e\udcff") == \
        "a\\nb\\r\\tc\\x1b[31m\\x00\\x7f\\u2028\\u202e\\udcff"
    assert safe_text("é ü 名前") == "é ü 名前"
    assert safe_text(None) == "-" and safe_text(3) == "3"
    assert safe_text("x" * 300) == "x" * 200 + "...[100 more]"
    assert safe_text("\n" * 150, limit=5) == "\\n\\n\\" + "...[295 more]"


@pytest.mark.parametrize("applied", [False, True])
def test_a_newline_in_the_profile_name_cannot_forge_a_log_line(site, monkeypatch, applied):
    profile = "ring\n2026-01-01 00:00:00,000 rankmap[1] FORGED\x1b[2J"
    monkeypatch.setenv("SPANK_RANKMAP_COMM_PROFILE", profile)
    monkeypatch.setenv("SPANK_RANKMAP_MODE", "topdown\nFORGED-ALGORITHM")
    monkeypatch.setenv("SLURM_JOB_NAME", "name\nFORGED-NAME")

    def worker(env, job_dir, request, uid, gid, timeout, *limits):
        assert request.profile == profile  # the computation gets the real name
        if applied:
            job_dir.write({"report": "applied"})
        return WorkerStatus(applied=applied, reason=f"profile {request.profile} not found",
                            notes=(f"note about {request.profile}",), objective=1.0, n=4,
                            traceback="Traceback\n  FORGED-TB" if not applied else None)

    monkeypatch.setattr(prolog, "run_worker", worker)
    assert prolog.main() == 0
    lines = log_lines(site["log"])
    assert len(lines) == (2 if applied else 3)  # one line per record
    assert not any("FORGED" in line[:40] for line in lines)
    assert all("\x1b" not in line for line in lines)
    assert "ring\\n2026-01-01 00:00:00,000 rankmap[1] FORGED\\x1b[2J" in lines[-1 if applied
                                                                             else 1]
    if applied:
        assert "topdown\\nFORGED-ALGORITHM" in lines[-1]
    else:
        report = (site["out"] / "job.61" / "report.txt").read_text()
        assert "\x1b" not in report
        assert report.splitlines()[2] == \
            "  profile    ring\\n2026-01-01 00:00:00,000 rankmap[1] FORGED\\x1b[2J"


def test_the_formatter_keeps_every_record_on_one_line(tmp_path):
    log_file = tmp_path / "log"
    prolog.setup_logging(parse_config(f'[general]\nlog_file = "{log_file}"\n', "t"))
    prolog.log.warning("a raw %s", "value\nFORGED")
    try:
        raise ValueError("multi\nline")
    except ValueError:
        prolog.log.exception("with a traceback")
    lines = log_lines(log_file)
    assert len(lines) == 2 and "value\\nFORGED" in lines[0] and "multi\\nline" in lines[1]


def test_the_fallback_report_escapes_what_the_user_chose():
    request = MappingRequest("x\ny", "graph", "topdown", 1.0, "user")
    files = prolog.fallback_report("7", request, "profile 'x\ny' \x1b[31mnot found")
    assert files["report"].count("\n") == 6
    assert "profile    x\\ny\n" in files["report"]
    assert "NOT applied: profile 'x\\ny' \\x1b[31mnot found\n" in files["report"]
    record = json.loads(files["report_json"])
    assert record["profile"] == "x\\ny" and "\x1b" not in record["fallback_reason"]


def test_the_task_prolog_prints_one_line_per_message(tmp_path):
    d = tmp_path / "job.62"
    d.mkdir()
    (d / "report.json").write_text(json.dumps({"job_id": "62", "applied": False,
                                               "fallback_reason": "x\nexport LD_PRELOAD=/x"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[general]\noutput_dir = "{tmp_path}"\n')
    lines = exports({"SLURM_JOB_ID": "62", "RANKMAP_CONFIG": str(cfg)})
    assert len(lines) == 2 and all(line.startswith(("export RANKMAP_REPORT=", "print "))
                                   and "\n" not in line for line in lines)
    assert lines[1].startswith("print rankmap: placement NOT applied (x\\nexport LD_PRELOAD")
    assert exports({"SLURM_JOB_ID": "62\n", "RANKMAP_CONFIG": str(cfg)}) == []
    (tmp_path / "job.63_2").mkdir()
    (tmp_path / "job.63_2" / "report.json").write_text('{"job_id": "63_2", "applied": false}')
    assert exports({"SLURM_JOB_ID": "63_2", "RANKMAP_CONFIG": str(cfg)})[0] == \
        f"export RANKMAP_REPORT={tmp_path / 'job.63_2' / 'report.txt'}"


# -- a report on every failure path (finding 8) --------------------------------------

def test_a_corrupt_config_is_logged_and_reported_in_the_default_place(site, defaults,
                                                                       capsys):
    site["config"].write_text("[general\noutput_dir = 3\n")
    assert prolog.main() == 0
    job_dir = defaults["output_dir"] / "job.61"
    report = (job_dir / "report.txt").read_text()
    assert "NOT applied: configuration error:" in report and "TOML syntax error" in report
    assert json.loads((job_dir / "report.json").read_text())["applied"] is False
    line, created = log_lines(defaults["log_file"])
    assert "job 61: configuration error:" in line and str(site["config"]) in line
    assert f"created the output directory {defaults['output_dir']}" in created
    assert "job 61: configuration error:" in capsys.readouterr().err  # slurmd's log
    # the task prolog, with the same broken file, finds the report there ...
    lines = exports(dict(os.environ))
    assert lines[0] == f"export RANKMAP_REPORT={job_dir / 'report.txt'}"
    assert "configuration error" in lines[-1]
    # ... and the epilog removes it
    assert prolog.epilog_main() == 0
    assert not job_dir.exists()


def test_a_corrupt_config_reports_only_to_a_job_that_asked(site, defaults):
    site["config"].write_text("[nonsense]\n")
    os.environ.pop("SPANK_RANKMAP_COMM_PROFILE")
    assert prolog.main() == 0
    assert not defaults["output_dir"].exists()
    assert "unknown section [nonsense]" in defaults["log_file"].read_text()


def test_an_exception_in_the_computation_still_gives_a_report(site, monkeypatch):
    def broken(env, job_dir, request, uid, gid, timeout, *limits):
        job_dir.write({"rankfile": "half-written"})
        raise RuntimeError("boom\nFORGED")

    monkeypatch.setattr(prolog, "run_worker", broken)
    assert prolog.main() == 0
    job_dir = site["out"] / "job.61"
    assert "NOT applied: internal error: RuntimeError: boom\\nFORGED" in \
        (job_dir / "report.txt").read_text()
    assert not (job_dir / "rankfile").exists()
    lines = log_lines(site["log"])
    assert "job 61: internal error: RuntimeError: boom\\nFORGED; default placement" in lines[0]
    assert "Traceback" in lines[1]


def test_an_exception_before_the_job_dir_exists_still_gives_a_report(site, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr(prolog, "decide", broken)
    assert prolog.main() == 0
    assert "internal error: KeyError: 'surprise'" in \
        (site["out"] / "job.61" / "report.txt").read_text()
    assert "internal error: KeyError" in site["log"].read_text()


def test_an_unusable_output_dir_reports_in_the_fallback_dir(site, monkeypatch):
    os.chmod(site["out"], 0o1777)  # world-writable, even with the sticky bit
    monkeypatch.setattr(prolog, "run_worker", lambda *a: pytest.fail("must not compute"))
    assert prolog.main() == 0
    report = (site["fallback"] / "job.61" / "report.txt").read_text()
    assert "cannot use output directory" in report and "writable by everyone" in report
    assert os.listdir(site["out"]) == []
    text = site["log"].read_text()
    assert "cannot use output directory" in text and "report written to" in text
    assert exports(dict(os.environ))[0] == \
        f"export RANKMAP_REPORT={site['fallback'] / 'job.61' / 'report.txt'}"


def test_no_usable_directory_at_all_is_logged(site, tmp_path):
    os.chmod(site["out"], 0o777)
    (tmp_path / "fallback").write_text("a file, not a directory")
    assert prolog.main() == 0
    assert "no report written either" in site["log"].read_text()


def test_a_failed_worker_leaves_no_launcher_file_and_a_report(site, monkeypatch):
    def crashed(env, job_dir, request, uid, gid, timeout, *limits):
        job_dir.write({name: "x" for name in
                       ("rankfile", "hostfile", "machinefile", "slurm_hostfile")})
        job_dir.write({"report": "rankmap applied (a lie)"})
        return WorkerStatus(applied=False, reason="the computation failed (exit -9): ")

    monkeypatch.setattr(prolog, "run_worker", crashed)
    assert prolog.main() == 0
    job_dir = site["out"] / "job.61"
    assert sorted(os.listdir(job_dir)) == ["report.json", "report.txt"]
    assert "NOT applied: the computation failed" in (job_dir / "report.txt").read_text()
