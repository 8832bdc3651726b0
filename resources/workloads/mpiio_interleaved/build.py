"""Compile interleaved.c with the mpicc of the MPI installed beside this Python (the mpich wheel).

usage: python build.py OUTPUT
"""

import shutil
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
beside = Path(sys.executable).parent / "mpicc"
mpicc = str(beside) if beside.is_file() else shutil.which("mpicc")
if mpicc is None:
    sys.exit("build.py: no mpicc beside this Python nor on PATH (pip install mpich)")
out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
subprocess.run([mpicc, "-O2", "-Wall", "-o", str(out), str(here / "interleaved.c")], check=True, timeout=120)
