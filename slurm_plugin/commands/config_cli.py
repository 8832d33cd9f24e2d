"""``rankmap config``: the site configuration's command-line side (config.py reads and
checks the file; this module only mounts the subcommands)."""

from __future__ import annotations

from ..site.config import DEFAULT_PATH


def add_config_commands(sub) -> None:
    """``rankmap config check [--config FILE]``."""
    p = sub.add_parser("config", help="site configuration")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    c = csub.add_parser("check", help="validate the site config and print effective values")
    c.add_argument("--config", metavar="FILE", help=f"default: $RANKMAP_CONFIG or {DEFAULT_PATH}")
    from .config_check import check_command  # effective values, then site warnings

    c.set_defaults(func=check_command)
