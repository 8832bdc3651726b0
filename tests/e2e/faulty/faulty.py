"""A tiny workload for the fault matrix (tests/e2e/test_faults.py): each fault on demand.

Its time is ``unit.SLEEP_S * unit.FACTOR`` (the patch in ``faster.diff`` shrinks both, in two
files, so a half-applied patch is visibly not the patched program). Environment switches:

- ``FAULTY_DIR``: where it records its pid (``main-<pid>``) and its grandchild's (``gc-<pid>``);
- ``FAULTY_CHILD``: ``group`` starts a long-sleeping grandchild in its process group, ``setsid``
  one that leaves the group (``os.setsid``);
- ``FAULTY_HOLD``: while this file exists, keep running (so a test can kill dftune mid-replicate);
- ``FAULTY_METRIC``: print this value as the metric instead of the time (``0``, ``nan``, ``-1``);
- ``FAULTY_FILL``: write this file until the disk is full, unless ``<FAULTY_FILL>.done`` exists;
- ``FAULTY_SPEED``: the knob of ``knob.toml``: 2 halves the sleep.
"""

import os
import subprocess
import sys
import time

import unit

start = time.perf_counter()
record = os.environ.get("FAULTY_DIR")
if record:
    open(os.path.join(record, f"main-{os.getpid()}"), "w").close()
child = os.environ.get("FAULTY_CHILD", "")
if child in ("group", "setsid"):
    code = (
        "import os, sys, time\n"
        + ("os.setsid()\n" if child == "setsid" else "")
        + "open(os.path.join(sys.argv[1], f'gc-{os.getpid()}'), 'w').close()\n"
        + "time.sleep(120)\n"
    )
    subprocess.Popen([sys.executable, "-c", code, record or "."])
    while record and not any(n.startswith("gc-") for n in os.listdir(record)):
        time.sleep(0.01)
fill = os.environ.get("FAULTY_FILL")
if fill and not os.path.exists(fill + ".done"):
    with open(fill, "ab") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 16))
                fh.flush()
        except OSError:
            pass
hold = os.environ.get("FAULTY_HOLD")
deadline = time.monotonic() + 60
while hold and os.path.exists(hold) and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(unit.SLEEP_S * unit.FACTOR / int(os.environ.get("FAULTY_SPEED", "1")))
print(f"version {unit.VERSION}")
print(f"run_time_s {os.environ.get('FAULTY_METRIC') or f'{time.perf_counter() - start:.6f}'}")
