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


extensions = [compiled(m) for m in ("mapper._kernels", "mapper.mesh._archaware",
                                    "mapper.construction._boxes", "mapper._linkload",
                                    "mapper.search._cycles", "mapper.search._congested")]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False,
                                                 "cdivision": True, "initializedcheck": False}))
