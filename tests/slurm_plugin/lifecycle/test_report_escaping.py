"""The worker's reports quote what the job's user wrote (issue 28 item 5): a ``file:``,
``summa-fpm:FILE`` or ``mesh:`` spec with a newline, ESC or BEL in it reaches
report.txt and report.json with those characters as visible escapes, the report's own
line breaks untouched.  The worker runs in this process (tests/helpers/worker_harness.py)
with the pyslurm stand-in, as in tests/slurm_plugin/modes/test_summa_job.py."""

from __future__ import annotations

import json
import sys
import types

import pytest

from slurm_plugin.common.safe_text import escape_strings
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.worker_harness import compute_into, job_request

NASTY = "ev\nil\x1b]0;pwned\x07\x1b[2J"
SHOWN = "ev\\nil\\x1b]0;pwned\\x07\\x1b[2J"


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A 16-task job on 4 nodes (pyslurm stand-in), user files allowed, the worker's
    environment; ``nasty`` is a directory whose name holds a newline, ESC and BEL."""
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())
    (tmp_path / "topology.conf").write_text("SwitchName=s1 Nodes=n[1-2]\n"
                                            "SwitchName=s2 Nodes=n[3-4]\n"
                                            "SwitchName=top Switches=s[1-2]\n")
    out = tmp_path / "out"
    (out / "job.42").mkdir(parents=True)
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                      f'[slurm]\nbackend = "pyslurm"\ntopology = "{tmp_path}/topology.conf"\n'
                      f'[profiles]\nstores = ["{tmp_path}"]\nallow_user_files = true\n')
    nasty = tmp_path / NASTY
    nasty.mkdir()
    env = {"RANKMAP_CONFIG": str(config), "RANKMAP_JOB_DIR": str(out / "job.42"),
           "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
    return types.SimpleNamespace(dir=out / "job.42", env=env, nasty=nasty)


def report_of(job, profile: str, algorithm: str = "fast") -> tuple[str, dict]:
    status = compute_into(job.env, job_request(profile, algorithm))
    assert not status["applied"] and status["reason"]
    text = (job.dir / "report.txt").read_text(encoding="utf-8")
    record = json.loads((job.dir / "report.json").read_text(encoding="utf-8"))
    return text, record


def assert_escaped(text: str, record: dict) -> None:
    assert "rankmap was NOT applied" in text
    assert all(c == "\n" or c.isprintable() for c in text), repr(text)
    assert SHOWN in text
    for key in ("profile", "fallback_reason", "summary"):
        assert record[key].isprintable(), (key, record[key])
    assert SHOWN in record["fallback_reason"] and SHOWN in record["summary"]


@pytest.mark.parametrize("name", ["gone.mtx", "broken.mtx"])
def test_a_file_profile_path_is_escaped_in_the_report(job, name):
    (job.nasty / "broken.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                          "not a header\n")
    text, record = report_of(job, f"file:{job.nasty / name}")
    assert_escaped(text, record)
    assert record["profile"] == f"file:{job.nasty / name}".replace(NASTY, SHOWN)


@pytest.mark.parametrize("name", ["gone.txt", "broken.txt"])
def test_a_summa_speeds_path_is_escaped_in_the_report(job, name):
    (job.nasty / "broken.txt").write_text("1\nfast\n")
    text, record = report_of(job, f"summa-fpm:{job.nasty / name}", "summa")
    assert_escaped(text, record)


def test_a_mesh_spec_is_escaped_in_the_report(job):
    text, record = report_of(job, f"mesh:{NASTY}")
    assert_escaped(text, record)
    assert record["profile"] == f"mesh:{SHOWN}"


def test_escape_strings_goes_through_records():
    record = {"a\x1b": ["x\ny", ("\x07", 3)], "n": 1.5, "ok": None, "b": True}
    assert escape_strings(record) == {"a\\x1b": ["x\\ny", ("\\x07", 3)], "n": 1.5,
                                      "ok": None, "b": True}
