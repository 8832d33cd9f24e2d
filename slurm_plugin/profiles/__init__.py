"""Communication profiles: the store, generators, profiles measured more than once
(samples), and the Open MPI monitoring and SimGrid TI importers; ``rankmap profile``
is :mod:`slurm_plugin.commands.profile_cli`."""

from .generators import GENERATORS, GeneratorError, generate
from .store import ProfileError, ProfileStore, resolve_profile

__all__ = ["GENERATORS", "GeneratorError", "ProfileError", "ProfileStore", "generate",
           "resolve_profile"]
