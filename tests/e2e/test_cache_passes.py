"""A trainer that makes two passes over its samples, with a real cache (the later pass served from
memory) and a decoy "memoizing" knob that quietly stops after the first pass, both under a
cache's strategy id. Their traces are the same: only the program's account of its passes can
tell them apart.

Bare (nothing counts the passes), the cache's win is a person's question, never a silent win;
with a work counter of the samples, the cache is judged by its numbers and the decoy refused.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

pytestmark = pytest.mark.e2e

TRAINER = textwrap.dedent("""
    import argparse, os, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache", type=int, default=0)
    ap.add_argument("--memo", type=int, default=0)
    ap.add_argument("--setup-only", action="store_true")
    a = ap.parse_args()
    if a.setup_only:
        os.makedirs(a.data, exist_ok=True)
        for i in range(48):
            with open(os.path.join(a.data, f"s{i:03d}.bin"), "wb") as f:
                f.write(os.urandom(128 * 1024))
        raise SystemExit
    names = sorted(os.listdir(a.data))
    epochs = 1 if a.memo else 2  # the decoy: its "memoizing" stops after the first pass
    kept, seen = {}, 0
    t = time.perf_counter()
    for epoch in range(epochs):
        for name in names:
            if a.cache and name in kept:
                data = kept[name]
            else:
                time.sleep(0.002)  # the remote store's latency for each sample
                with open(os.path.join(a.data, name), "rb", buffering=0) as f:
                    data = b"".join(iter(lambda: f.read(8192), b""))
                if a.cache:
                    kept[name] = data
            sum(data[::4096])  # the step's work on the sample
            seen += 1
    print(f"samples {seen}")
    print(f"run_time_s {time.perf_counter() - t:.6f}")
""")

SPEC = textwrap.dedent("""
    name = "two-pass-trainer"
    command = ["{python}", "trainer.py", "--data", "{data_dir}", "--cache", "{CACHE}", "--memo", "{MEMO}"]
    setup = ["{python}", "trainer.py", "--data", "{data_dir}", "--setup-only"]
    data_dir = "{workdir}/data"
    replicates = 3
    timeout_s = 60
    [metric]
    kind = "stdout_regex"
    pattern = 'run_time_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "CACHE"
    kind = "arg"
    values = [0, 1]
    default = 0
    strategy = "l1.dataset_cache"
    [[knobs]]
    name = "MEMO"
    kind = "arg"
    values = [0, 1]
    default = 0
    strategy = "l1.dataset_cache"
""")

COUNTED = """
[[work]]
name = "samples"
pattern = 'samples ([0-9]+)'
"""


def _run(tmp: Path, spec: str) -> tuple[dict[str, str], str]:
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    doc = c.tune_in(tmp, {"trainer.py": TRAINER, "workload.toml": spec}, experiments=3)
    verdicts = {v["proposal"]: v["verdict"] for v in doc["verdicts"]}
    return verdicts, (Path(doc["run_dir"]) / "report.md").read_text()


def test_without_an_account_of_the_passes_a_cache_is_a_question(tmp_path: Path) -> None:
    verdicts, report = _run(tmp_path, SPEC)
    assert verdicts.get("CACHE=1") in ("pending", "inconclusive"), verdicts
    assert verdicts.get("MEMO=1") not in ("win",), verdicts
    assert "cannot tell a cache serving them from memory" in report


def test_a_counter_of_the_samples_keeps_the_cache_and_refuses_the_lost_epoch(tmp_path: Path) -> None:
    verdicts, report = _run(tmp_path, SPEC + COUNTED)
    assert verdicts.get("CACHE=1") not in (None, "rejected", "inconclusive", "pending"), verdicts
    assert verdicts.get("MEMO=1") == "rejected", verdicts
    assert "work counter samples 96 -\\> 48 (-50.0%)" in report
