"""Compiles mapper's hot loops (Cython) at ``pip install .``; metadata is in pyproject.toml."""

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "mapper._kernels",
        ["mapper/_kernels.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "mapper.mesh._archaware",
        ["mapper/mesh/_archaware.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "mapper.construction._boxes",
        ["mapper/construction/_boxes.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "mapper._linkload",
        ["mapper/_linkload.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "mapper.search._cycles",
        ["mapper/search/_cycles.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "mapper.search._congested",
        ["mapper/search/_congested.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False,
                                                 "cdivision": True, "initializedcheck": False}))
