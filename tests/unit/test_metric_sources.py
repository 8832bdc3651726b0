"""Metrics where programs put them: a stream, a JSON/CSV file, several values combined, IOR's and
DLIO's own summaries; and the spec's one-line errors for a metric that cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dftune.core.process import ProcessResult
from dftune.tools.runner.bench import extract_metric, make_data_dir, metric_path
from dftune.tools.runner.metrics import MetricNotFound, csv_values, dlio_value, ior_value, json_values
from dftune.tools.runner.spec import SpecError, WorkloadSpec, load_spec

# IOR 4.0 prints its results table, then Max Write/Max Read, then a wide summary whose rows also
# start with write/read (they must not be read as the results table).
IOR_OUT = """\
IOR-4.0.0: MPI Coordinated Test of Parallel I/O
Command line        : ior -a MPIIO -c -t 4k -b 4k -s 4096 -i 2 -o /w/data/ior.dat

access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter
------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----
write     85.41      21866      0.000088    4.00       4.00       0.001187   0.748901   0.000512   0.749363   0
read      190.23     48705      0.000040    4.00       4.00       0.000378   0.336217   0.000139   0.336470   0
write     80.00      20480      0.000090    4.00       4.00       0.001000   0.799000   0.000400   0.800637   1
read      200.00     51200      0.000039    4.00       4.00       0.000300   0.319700   0.000100   0.320000   1
Max Write: 85.41 MiB/sec (89.56 MB/sec)
Max Read:  200.00 MiB/sec (209.72 MB/sec)

Summary of all tests:
Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum
write          85.41      80.00      82.70       2.70   21865.86   20480.00   21172.93     692.93    0.77500     0      2   2    2   0     0        1         0    0   4096     4096     4096      32.0 MPIIO      0
read          200.00     190.23     195.11       4.88   51200.00   48704.96   49952.48    1247.52    0.32823     0      2   2    2   0     0        1         0    0   4096     4096     4096      32.0 MPIIO      0
"""  # noqa: E501 (IOR's output verbatim: the parser must read its real column widths)

DLIO_LOG = """\
[OUTPUT] 2026-12-01T22:00:00.000000 Ending epoch 1 - 8 steps completed in 2.10 s
[OUTPUT] 2026-12-01T22:00:00.100000 Saved outputs in /w/output
[OUTPUT] Averaged metric over all steps/epochs
[METRIC] ==========================================================
[METRIC] Number of Simulated Accelerators: 1
[METRIC] Training Accelerator Utilization [AU] (%): 64.6854 (0.0000)
[METRIC] Training Throughput (samples/second): 3434.5239 (0.0000)
[METRIC] Training I/O Throughput (MB/second): 375.5596 (1.0000)
[METRIC] train_au_meet_expectation: fail
[METRIC] ==========================================================
"""


def _spec(tmp_path: Path, metric: str, name: str = "w.toml") -> WorkloadSpec:
    p = tmp_path / name
    p.write_text(f'name = "w"\ncommand = ["prog"]\n{metric}\n')
    return load_spec(p)


def _run(tmp_path: Path, out: str = "", err: str = "") -> Path:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "r0.out").write_text(out)
    (logs / "r0.err").write_text(err)
    return logs / "r0.out"


OK = ProcessResult(status="ok", exit_code=0, wall_s=1.5)


def test_ior_fields_read_the_results_table_and_the_max_lines() -> None:
    assert ior_value(IOR_OUT, "max_write", "stdout") == pytest.approx(85.41)
    assert ior_value(IOR_OUT, "max_read", "stdout") == pytest.approx(200.0)
    # mean of total(s) over the two iterations, never the summary's wide rows
    assert ior_value(IOR_OUT, "write_time", "stdout") == pytest.approx((0.749363 + 0.800637) / 2)
    assert ior_value(IOR_OUT, "read_time", "stdout") == pytest.approx((0.336470 + 0.320000) / 2)
    with pytest.raises(MetricNotFound, match="no read row"):
        ior_value(IOR_OUT.replace("read ", "xxxx "), "read_time", "stdout")


def test_ior_write_plus_read_time_from_a_spec(tmp_path: Path) -> None:
    spec = _spec(tmp_path, '[metric]\nkind = "ior"\nfield = ["write_time", "read_time"]\ncombine = "sum"')
    assert spec.metric.lower_is_better  # times
    value, why = extract_metric(spec, OK, _run(tmp_path, out=IOR_OUT))
    assert why == "" and value == pytest.approx(0.775 + 0.328235)
    bw = _spec(tmp_path, '[metric]\nkind = "ior"\nfield = "max_write"', "bw.toml")
    assert not bw.metric.lower_is_better  # MiB/s: higher is better unless the spec says otherwise


def test_dlio_metric_lines_on_stderr_and_its_summary_json(tmp_path: Path) -> None:
    spec = _spec(tmp_path, '[metric]\nkind = "dlio"\nfield = "train_throughput"')
    assert not spec.metric.lower_is_better and spec.metric.streams() == ("stdout", "stderr")
    value, why = extract_metric(spec, OK, _run(tmp_path, err=DLIO_LOG))  # DLIO logs to stderr
    assert why == "" and value == pytest.approx(3434.5239)
    assert dlio_value(DLIO_LOG, "train_io", "stderr") == pytest.approx(375.5596)
    summary = {"metric": {"train_throughput_mean_samples_per_second": 12.5, "train_au_mean_percentage": 99.0}}
    assert dlio_value(json.dumps(summary), "train_au", "summary.json", summary_json=True) == 99.0
    from_file = _spec(
        tmp_path,
        '[metric]\nkind = "dlio"\nfield = "train_throughput"\npath = "{workdir}/out/summary.json"',
        "f.toml",
    )
    target = metric_path(from_file, from_file.settings(), tmp_path)
    assert target == tmp_path / "out" / "summary.json"
    target.parent.mkdir()
    target.write_text(json.dumps(summary))
    assert extract_metric(from_file, OK, _run(tmp_path), target) == (12.5, "")


def test_regex_stream_choice_and_combined_patterns(tmp_path: Path) -> None:
    out, err = "write_time_s 0.25\n", "read_time_s 0.5\nwrite_time_s 9\n"
    both = _spec(
        tmp_path,
        "[metric]\nkind = \"regex\"\npatterns = ['write_time_s ([0-9.]+)', "
        '\'read_time_s ([0-9.]+)\']\nstream = "stdout"\ncombine = "max"',
    )
    value, why = extract_metric(both, OK, _run(tmp_path, out=out, err=err))
    assert (
        value is None and "read_time_s" in why and "stdout" in why
    )  # stdout only: the read time is on stderr
    err_only = _spec(
        tmp_path,
        '[metric]\nkind = "regex"\npattern = \'write_time_s ([0-9.]+)\'\nstream = "stderr"',
        "e.toml",
    )
    assert extract_metric(err_only, OK, _run(tmp_path, out=out, err=err)) == (9.0, "")
    summed = _spec(
        tmp_path,
        "[metric]\nkind = \"regex\"\npatterns = ['write_time_s ([0-9.]+)', "
        "'read_time_s ([0-9.]+)']\nstream = \"both\"",
        "s.toml",
    )
    value, _ = extract_metric(summed, OK, _run(tmp_path, out="write_time_s 0.25\n", err="read_time_s 0.5\n"))
    assert value == pytest.approx(0.75)


def test_json_and_csv_files(tmp_path: Path) -> None:
    doc = json.dumps({"phases": [{"name": "write", "s": 1.5}, {"name": "read", "s": "0.5"}], "ok": True})
    assert json_values(doc, ["phases.0.s", "phases.-1.s"], "r.json") == [1.5, 0.5]
    with pytest.raises(MetricNotFound, match=r"key 'phases\.2\.s' not found in r\.json"):
        json_values(doc, ["phases.2.s"], "r.json")
    with pytest.raises(MetricNotFound, match="not a number"):
        json_values(doc, ["ok"], "r.json")
    text = "epoch,io_s,total_s\n1,0.5,2\n2,0.25,1.5\n\n"
    assert csv_values(text, ["io_s", "total_s"], "m.csv") == [0.25, 1.5]  # the last data row
    with pytest.raises(MetricNotFound, match=r"column 'io' not found in m\.csv"):
        csv_values(text, ["io"], "m.csv")
    spec = _spec(
        tmp_path,
        '[metric]\nkind = "file"\npath = "{data_dir}/m.csv"\ncolumn = ["io_s", "total_s"]\ncombine = "mean"',
    )
    target = metric_path(spec, spec.settings(), tmp_path)
    assert target == tmp_path / "data" / "m.csv"
    assert make_data_dir(spec, spec.settings(), tmp_path) == tmp_path / "data"  # IOR calls statvfs on it
    assert make_data_dir(spec, spec.settings(), tmp_path) is None  # there already
    assert extract_metric(spec, OK, _run(tmp_path), target)[1].startswith("metric file")  # not written yet
    target.write_text(text)
    assert extract_metric(spec, OK, _run(tmp_path), target) == (pytest.approx(0.875), "")


def test_a_data_dir_outside_the_workdir_is_never_created(tmp_path: Path) -> None:
    p = tmp_path / "w.toml"
    p.write_text(f'name = "w"\ncommand = ["prog"]\ndata_dir = "{tmp_path}/users-data"\n')
    spec = load_spec(p)
    assert make_data_dir(spec, spec.settings(), tmp_path / "run") is None
    assert not (tmp_path / "users-data").exists()


@pytest.mark.parametrize(
    ("metric", "says"),
    [
        ('kind = "regex"', "metric: kind = 'regex' needs a pattern"),
        (
            'kind = "stdout_regex"\npattern = "x"\nstream = "stderr"',
            "use kind = 'regex' with stream = 'stderr'",
        ),
        ('kind = "file"\nkey = "a"', "metric: kind = 'file' needs a path"),
        (
            'kind = "file"\npath = "r.json"\nkey = "a"\ncolumn = "b"',
            "a key (JSON) or a column (CSV), not both",
        ),
        ('kind = "file"\npath = "{nowhere}/r.json"\nkey = "a"', "metric.path: placeholder {nowhere}"),
        ('kind = "ior"\nfield = "max_wirte"', "field 'max_wirte' is not one of max_write"),
        ('kind = "ior"\nfield = ["max_write", "read_time"]', "mix MiB/s and seconds"),
        ('kind = "dlio"', "kind = 'dlio' needs a field"),
        ('kind = "wall_time"\nfield = "x"', "field is only used with kind = 'ior' or 'dlio'"),
        ('kind = "regex"\npattern = "x"\ncombine = "median"', "metric.combine"),
        ('kind = "regex"\npattern = "("', "not a valid regular expression"),
    ],
)
def test_bad_metric_is_one_line_naming_the_file_and_key(tmp_path: Path, metric: str, says: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, f"[metric]\n{metric}")
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(tmp_path / "w.toml")) and says in text, text
