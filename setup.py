"""Build the optional native trace reader (``dftune.tools.trace._fastscan``).

Everything else lives in pyproject.toml.  ``optional=True``: on a machine without a C
compiler or zlib headers the build step is skipped with a warning and dftune falls back
to its DuckDB trace reader, so ``pip install .`` and ``pip install -e .`` still succeed.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dftune.tools.trace._fastscan",
            sources=["tools/trace/_fastscan.c"],
            libraries=["z"],
            extra_compile_args=["-O2", "-std=gnu11"],
            optional=True,
        )
    ]
)
