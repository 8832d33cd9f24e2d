"""docs/troubleshooting.md quotes the report's reason texts: every quoted reason is one
the code can give (its literal parts appear in a string of slurm_plugin's source), so
the page cannot describe a message that no longer exists."""

import ast
import re

from tests.helpers.paths import REPO

PAGE = REPO / "docs/troubleshooting.md"


def source_strings() -> list[str]:
    """Every string literal of slurm_plugin, f-strings with each field as '…'."""
    out = []
    for path in (REPO / "slurm_plugin").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                out.append("".join(v.value if isinstance(v, ast.Constant) else "…"
                                   for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
    return out


def quoted_reasons() -> list[str]:
    return re.findall(r"^### `(.+)`$", PAGE.read_text(), re.M)


def test_the_page_quotes_reasons():
    assert len(quoted_reasons()) >= 15


def test_every_quoted_reason_is_one_the_code_gives():
    """An error the worker reports comes as ``ClassName: message``
    (slurm_plugin.lifecycle.job_worker.run): the class must exist, the message be a
    string of the code."""
    strings = source_strings()
    code = "\n".join(p.read_text() for root in ("slurm_plugin", "mapper")
                     for p in (REPO / root).rglob("*.py"))
    for reason in quoted_reasons():
        error = re.match(r"(\w+Error): ", reason)
        if error:
            assert f"class {error.group(1)}(" in code, reason
            reason = reason[error.end():]
        for part in reason.split("…"):
            # a value's unit ("… s") may end one string and the next begin after it
            part = re.sub(r"^(s|bytes)\b", "", part.strip(" '")).strip()
            if len(part) < 6:
                continue
            assert any(part in s for s in strings), (reason, part)
