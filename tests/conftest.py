"""Fixtures shared by the unit tests."""

import pytest


@pytest.fixture
def restore_prolog_logging():
    """The prolog configures the 'rankmap' logger's handlers; put them back afterwards
    (closing the ones a test added) so tests do not leak log files into each other."""
    from slurm_plugin.lifecycle import prolog

    handlers, level = list(prolog.log.handlers), prolog.log.level
    yield
    for h in prolog.log.handlers:
        if h not in handlers:
            h.close()
    prolog.log.handlers[:] = handlers
    prolog.log.setLevel(level)


@pytest.fixture
def defaults(tmp_path, monkeypatch):
    """The built-in output, fallback and log locations pointed into tmp_path (never the
    real /run, /var/log): where a prolog with an unusable configuration reports."""
    from slurm_plugin.site.config import DEFAULTS

    paths = {"output_dir": tmp_path / "default-run" / "rankmap",
             "log_file": tmp_path / "default-log" / "rankmap.log",
             "fallback_dir": tmp_path / "default-run" / "rankmap-fallback"}
    (tmp_path / "default-run").mkdir()
    for key, path in paths.items():
        section = "prolog" if key == "fallback_dir" else "general"
        entry = DEFAULTS[section][key]
        monkeypatch.setitem(DEFAULTS[section], key, (str(path), *entry[1:]))
    return paths
