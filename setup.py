"""Build the optional native trace reader (``dftune.tools.trace._fastscan``).

Everything else lives in pyproject.toml.  ``optional=True``: on a machine without a C
compiler or zlib headers the build step is skipped with a warning and dftune falls back
to its DuckDB trace reader, so ``pip install .`` and ``pip install -e .`` still succeed.

Inflate: when ISA-L's igzip (Debian ``libisal-dev``) compiles and links here, the reader
uses it instead of zlib: on dftracer's gzip files it inflates about 3x faster, streaming,
with the same CRC and length checks.  The check is a compile-and-link test, so a missing
header or library quietly leaves the zlib build; ``DFTUNE_NO_ISAL=1`` forces zlib.
``_fastscan.INFLATE`` says which one was built in.
"""

import os
import tempfile
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ISAL_PROBE = """
#include <isa-l/igzip_lib.h>
int main(void) {
    struct inflate_state s;
    isal_inflate_init(&s);
    s.crc_flag = ISAL_GZIP;
    return isal_inflate(&s) == ISAL_INCORRECT_CHECKSUM;
}
"""


def _links(compiler: Any, source: str, libraries: list[str]) -> bool:
    """Whether ``source`` compiles and links against ``libraries`` with this compiler."""
    with tempfile.TemporaryDirectory(prefix="dftune-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(source)
        try:
            objects = compiler.compile([str(src)], output_dir=tmp)
            compiler.link_executable(objects, "probe", output_dir=tmp, libraries=libraries)
        except Exception:  # CompileError, LinkError, or no compiler at all
            return False
    return True


class BuildExt(build_ext):
    def build_extensions(self) -> None:
        if os.environ.get("DFTUNE_NO_ISAL", "") not in ("", "0") or not _links(
            self.compiler, ISAL_PROBE, ["isal"]
        ):
            print("dftune: ISA-L (libisal-dev) not found, the native trace reader uses zlib")
        else:
            for ext in self.extensions:
                ext.define_macros.append(("DFT_HAVE_ISAL", "1"))
                ext.libraries = ["isal"]
        super().build_extensions()


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "dftune.tools.trace._fastscan",
            sources=["tools/trace/_fastscan.c"],
            libraries=["z"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,
        )
    ],
)
