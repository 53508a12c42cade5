"""`python -m benchmarks.gpu`, the command a GPU loan runs first: its smoke run (every
section at tiny sizes, on the CPU) writes both reports with every section's figures, and
its budget skips a case rather than run over."""

import json
import math
import os
import pathlib
import subprocess
import sys
import time

import jax
import pytest


ROOT = pathlib.Path(__file__).parents[1]
# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.append(str(ROOT))
from benchmarks import gpu  # noqa: E402


@pytest.mark.slow
def test_smoke_run_writes_both_reports(tmp_path):
    out = tmp_path / "report"
    command = [sys.executable, "-m", "benchmarks.gpu", "--smoke", "--out", str(out)]
    # The repository root first on the path, so that this tree's azx and benchmarks run.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = os.environ | {"PYTHONPATH": path}
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=1200)

    report = json.loads((out / "report.json").read_text())
    assert list(report["sections"]) == list(gpu.SECTIONS)
    for name, section in report["sections"].items():
        assert section["records"], name
        for record in section["records"]:
            assert "figures" in record, (name, record)  # neither skipped nor failed
            assert record["setting"] and record["figures"], (name, record)
            for field, value in record["figures"].items():
                assert isinstance(value, int | float), (name, field, value)
                assert math.isfinite(value) and value > 0, (name, field, value)
    for package in ("jax", "jaxlib", "mctx", "pgx", "equinox"):
        assert report["versions"][package], package

    text = (out / "report.md").read_text()
    device = jax.devices()[0].device_kind
    assert report["device"]["kind"] == device
    assert f"# GPU benchmark on {device}" in text
    for name in gpu.SECTIONS:
        assert f"## {name}" in text


def test_budget_skips_a_case_that_would_run_over_and_records_a_failure():
    group = gpu.Group(deadline=time.perf_counter() + 60.0, estimate=0.0)
    records = group.run({"case": 1}, lambda: [{"setting": {"case": 1}, "figures": {"x": 1.0}}])
    assert records == [{"setting": {"case": 1}, "figures": {"x": 1.0}}]

    def fails():
        raise RuntimeError("out of memory")

    assert group.run({"case": 2}, fails) == [
        {"setting": {"case": 2}, "error": "RuntimeError: out of memory"}
    ]
    group.estimate = 120.0  # the last case took longer than the group has left
    assert group.run({"case": 3}, pytest.fail) == [
        {"setting": {"case": 3}, "skipped": "over budget"}
    ]


def test_table_gives_every_setting_and_figure_and_why_a_case_has_none():
    records = [
        {"setting": {"batch": 256, "search": "native"}, "figures": {"ms_per_call": 12.25}},
        {"setting": {"batch": 4096}, "skipped": "over budget"},
    ]
    assert gpu.table(records).splitlines() == [
        "| batch | search | ms_per_call |",
        "|---|---|---|",
        "| 256 | native | 12.2 |",
        "| 4096 |  | skipped: over budget |",
    ]
