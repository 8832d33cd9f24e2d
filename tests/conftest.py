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
