"""Launcher files from a layout and a rank → slot mapping, rendered with jinja2.

Templates are looked up with a jinja2 ``ChoiceLoader``: the site directory
(``[render] templates_dir``) first, the packaged ``rankmap_templates`` second, so a site
overrides any single file and takes the rest from the package.  A site template can
still reach the packaged version of its own name as ``packaged/<name>`` (for example
``{% include "packaged/rankfile.j2" %}`` plus a site line).  Rendering is pure (strings
out); :mod:`slurm_plugin.files` writes them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2
import numpy as np

from .layout import Layout


def packaged_templates_dir() -> Path:
    try:
        import rankmap_templates  # installed wheel: templates/ ships as this package

        return Path(rankmap_templates.__file__).parent
    except ImportError:  # running from a source checkout
        return Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=8)
def _environment(templates_dir: str | None) -> jinja2.Environment:
    packaged = jinja2.FileSystemLoader(str(packaged_templates_dir()))
    loaders: list[jinja2.BaseLoader] = [packaged,
                                        jinja2.PrefixLoader({"packaged": packaged})]
    if templates_dir:
        loaders.insert(0, jinja2.FileSystemLoader(templates_dir))
    return jinja2.Environment(loader=jinja2.ChoiceLoader(loaders),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True,
                              autoescape=False)


def render_template(name: str, templates_dir: str | None = None, **context) -> str:
    return _environment(templates_dir or None).get_template(name).render(**context)


def core_list(cores: tuple[int, ...]) -> str:
    """``(2, 3)`` → ``2-3``; non-contiguous cores as a comma list ``1,3``."""
    if len(cores) > 1 and list(cores) == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def rank_rows(layout: Layout, mapping: np.ndarray) -> list[dict]:
    """Per rank, in rank order: host, socket and core list of its slot."""
    rows = []
    for rank, pe in enumerate(np.asarray(mapping).tolist()):
        slot = layout.slots[pe]
        rows.append({"rank": rank, "host": slot.host, "socket": slot.socket,
                     "cores": core_list(slot.cores)})
    return rows


def host_rows(layout: Layout, mapping: np.ndarray) -> list[dict]:
    counts: dict[str, int] = {}
    for pe in np.asarray(mapping).tolist():
        host = layout.slots[pe].host
        counts[host] = counts.get(host, 0) + 1
    return [{"host": h, "slots": c} for h, c in counts.items()]


def render_rankfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    algorithm: str = "", job_id: str | None = None) -> str:
    return render_template("rankfile.j2", templates_dir, ranks=rank_rows(layout, mapping),
                           algorithm=algorithm or "rankmap", job_id=job_id or "-")


def render_hostfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    **_: object) -> str:
    return render_template("hostfile.j2", templates_dir, hosts=host_rows(layout, mapping))


def render_machinefile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                       **_: object) -> str:
    return render_template("machinefile.j2", templates_dir, ranks=rank_rows(layout, mapping))


def render_slurm_hostfile(layout: Layout, mapping: np.ndarray,
                          templates_dir: str | None = None, **_: object) -> str:
    return render_template("slurm_hostfile.j2", templates_dir,
                           ranks=rank_rows(layout, mapping))
