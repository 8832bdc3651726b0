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
    files = {"reader.py": READER, "workload.toml": SPEC.format(dataset=dataset)}
    doc = c.tune_in(tmp_path, files, experiments=3)
    verdicts = {v["proposal"]: v["verdict"] for v in doc["verdicts"]}
    assert verdicts.get("PREFETCH=2") == "rejected", verdicts
    assert verdicts.get("ORDERED=1") == "rejected", verdicts
    assert verdicts.get("THREADS=4") not in (None, "rejected", "inconclusive"), verdicts
    report = (Path(doc["run_dir"]) / "report.md").read_text()
    assert "outside input bytes read once 4,194,304 -\\> 2,097,152 (-50.0%)" in report
    said = [line[:400] for line in report.splitlines() if "ORDERED=1" in line][:3]
    assert any("access_pattern" in line and "another order" in line for line in said), said


TRAINER = textwrap.dedent("""
    import argparse, os, threading, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--async-save", type=int, default=0)
    ap.add_argument("--background", type=int, default=0)
    ap.add_argument("--setup-only", action="store_true")
    a = ap.parse_args()
    if a.setup_only:
        os.makedirs(a.data, exist_ok=True)
        for i in range(16):
            with open(os.path.join(a.data, f"s{i:02d}.bin"), "wb") as f:
                f.write(os.urandom(64 * 1024))
        raise SystemExit
    os.makedirs(a.ckpt, exist_ok=True)
    def save(step):
        with open(os.path.join(a.ckpt, f"ckpt_{step}.bin"), "wb", buffering=0) as f:
            for _ in range(256):
                f.write(b"w" * 4096)
            os.fsync(f.fileno())
    t, pending = time.perf_counter(), []
    for step in range(8):
        for name in sorted(os.listdir(a.data))[step * 2 : step * 2 + 2]:
            with open(os.path.join(a.data, name), "rb") as f:
                f.read()
        time.sleep(0.02)  # the step's compute
        if a.background and step % 4:  # the decoy: its "background" saving skips three of four
            continue
        if a.async_save or a.background:
            pending.append(threading.Thread(target=save, args=(step,)))
            pending[-1].start()
        else:
            save(step)
    for th in pending:
        th.join()
    print(f"run_time_s {time.perf_counter() - t:.6f}")
""")

CKPT_SPEC = textwrap.dedent("""
    name = "outside-checkpoints"
    command = ["{{python}}", "trainer.py", "--data", "{{data_dir}}", "--ckpt", "{ckpt}",
               "--async-save", "{{ASYNC}}", "--background", "{{BACKGROUND}}"]
    setup = ["{{python}}", "trainer.py", "--data", "{{data_dir}}", "--ckpt", "{ckpt}", "--setup-only"]
    data_dir = "{{workdir}}/data"
    replicates = 3
    timeout_s = 60
    [metric]
    kind = "stdout_regex"
    pattern = 'run_time_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "ASYNC"
    kind = "arg"
    values = [0, 1]
    default = 0
    strategy = "l1.async_checkpoint"
    [[knobs]]
    name = "BACKGROUND"
    kind = "arg"
    values = [0, 1]
    default = 0
    strategy = "l1.async_checkpoint"
""")


def test_fewer_checkpoints_to_an_outside_folder_are_refused(tmp_path: Path) -> None:
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    files = {"trainer.py": TRAINER, "workload.toml": CKPT_SPEC.format(ckpt=tmp_path / "ckpt")}
    doc = c.tune_in(tmp_path, files, experiments=2)
    verdicts = {v["proposal"]: v["verdict"] for v in doc["verdicts"]}
    assert verdicts.get("BACKGROUND=1") == "rejected", verdicts
    assert verdicts.get("ASYNC=1") not in (None, "rejected", "inconclusive"), verdicts
    report = (Path(doc["run_dir"]) / "report.md").read_text()
    assert "outside output bytes written once 8,388,608 -\\> 2,097,152 (-75.0%)" in report
