"""Communication profiles: the store, generators, and the Open MPI monitoring importer."""

from .generators import GENERATORS, GeneratorError, generate
from .store import ProfileError, ProfileStore, resolve_profile

__all__ = ["GENERATORS", "GeneratorError", "ProfileError", "ProfileStore", "generate",
           "resolve_profile"]
