"""Compiles mapper's hot loops (Cython) at ``pip install .``; metadata is in pyproject.toml."""

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup


def compiled(module: str) -> Extension:
    """The extension ``module`` built from its .pyx beside it, against numpy."""
    return Extension(module, [module.replace(".", "/") + ".pyx"],
                     include_dirs=[np.get_include()],
                     define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                     extra_compile_args=["-O3"])


# One extension per family of hot loops, each beside the Python module that calls it.
extensions = [compiled(m) for m in (
    "mapper.objectives._volumes", "mapper.objectives._link_load",
    "mapper.search._swap", "mapper.search._cycles", "mapper.search._congested",
    "mapper.search._routed",
    "mapper.partitioners._refine",
    "mapper.construction._greedy", "mapper.construction._boxes",
    "mapper.mesh._archaware")]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False,
                                                 "cdivision": True, "initializedcheck": False}))
