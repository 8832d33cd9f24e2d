"""The launcher table (README, docs/users.md) points every row at its test: each test it
names exists, so the table cannot point at a test that was renamed or removed."""

import re

from tests.helpers.paths import REPO


def test_every_test_the_launcher_tables_name_exists():
    named = set()
    for doc in ("README.md", "docs/users.md"):
        text = (REPO / doc).read_text()
        for cell in re.findall(r"`((?:test_launchers\.py)?::test_\w+|test_launchers\.py::\w+)`",
                               text):
            named.add(cell.rsplit("::", 1)[1])
    assert len(named) >= 8, named
    source = (REPO / "tests/e2e/test_launchers.py").read_text()
    defined = set(re.findall(r"^def (test_\w+)\(", source, re.M))
    assert named <= defined, f"named in the docs but not defined: {named - defined}"
