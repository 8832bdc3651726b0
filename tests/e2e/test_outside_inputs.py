"""A program whose dataset lives at an absolute path of the user's while its outputs go to the
spec's data folder: a "prefetch" knob that secretly reads every other sample must still be doing
less, a "read-ahead" that reads the shuffled samples in name order must still change the access
pattern, and spreading the same reads over threads must still be a win.

The guards key the data folder's files by their path in it; inputs named elsewhere are summed
apart (their bytes read at least once), so a knob cannot hide a smaller read behind the folder.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

pytestmark = pytest.mark.e2e

READER = textwrap.dedent("""
    import argparse, os, random, time
    from concurrent.futures import ThreadPoolExecutor
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--ordered", type=int, default=0)
    a = ap.parse_args()
    names = sorted(os.listdir(a.input))
    if not a.ordered:  # the decoy: its "read-ahead" reads the samples in name order, unshuffled
        random.Random(3).shuffle(names)
    if a.prefetch:  # the decoy: its "prefetching" only ever reads every other sample
        names = names[::2]
    def load(name):
        with open(os.path.join(a.input, name), "rb", buffering=0) as f:
            total = 0
            while chunk := f.read(16384):
                total += len(chunk)
        time.sleep(0.002)  # decoding the sample
        return total
    t = time.perf_counter()
    with ThreadPoolExecutor(a.threads) as pool:
        total = sum(pool.map(load, names))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "summary.bin"), "wb") as f:
        f.write(total.to_bytes(8, "little") * 1024)
    print(f"run_time_s {time.perf_counter() - t:.6f}")
""")

SPEC = textwrap.dedent("""
    name = "outside-input-reader"
    command = ["{{python}}", "reader.py", "--input", "{dataset}", "--out", "{{data_dir}}",
               "--threads", "{{THREADS}}", "--prefetch", "{{PREFETCH}}", "--ordered", "{{ORDERED}}"]
    data_dir = "{{workdir}}/data"
    replicates = 3
    timeout_s = 60
    [metric]
    kind = "stdout_regex"
    pattern = 'run_time_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "THREADS"
    kind = "arg"
    values = [1, 4]
    default = 1
    strategy = "l1.dataloader_workers"
    [[knobs]]
    name = "PREFETCH"
    kind = "arg"
    values = [0, 2]
    default = 0
    strategy = "l1.background_prefetch"
    [[knobs]]
    name = "ORDERED"
    kind = "arg"
    values = [0, 1]
    default = 0
    strategy = "l1.dataloader_prefetch"
""")


def test_reading_less_or_unshuffled_of_an_outside_dataset_is_refused_and_threads_are_kept(
    tmp_path: Path,
) -> None:
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    for i in range(64):
        (dataset / f"s{i:03d}.bin").write_bytes(os.urandom(64 * 1024))
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "workload.toml").write_text(SPEC.format(dataset=dataset))
    home = {**os.environ, "DFTUNE_HOME": str(tmp_path / "home")}
    doc = c.run_cli_json(
        "run",
        str(tmp_path / "workload.toml"),
        "--mode",
        "autonomous",
        "--max-experiments",
        "3",
        "--force",
        env=home,
    )
    assert doc["status"] == "completed", doc["status_reason"]
    verdicts = {v["proposal"]: v["verdict"] for v in doc["verdicts"]}
    assert verdicts.get("PREFETCH=2") == "rejected", verdicts
    assert verdicts.get("ORDERED=1") == "rejected", verdicts
    assert verdicts.get("THREADS=4") not in (None, "rejected", "inconclusive"), verdicts
    report = (Path(doc["run_dir"]) / "report.md").read_text()
    assert "outside input bytes read once 4,194,304 -\\> 2,097,152 (-50.0%)" in report
    said = [line[:400] for line in report.splitlines() if "ORDERED=1" in line][:3]
    assert any("access_pattern" in line and "another order" in line for line in said), said
