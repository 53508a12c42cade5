"""`azx train`'s settings for several processes: every setting that cannot work is one
error line (exit status 2) and no wait is longer than `--join-timeout`."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli import azx_cli, one_line_error


HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("settings", "needles"),
    [
        (["--num-processes", 2], ["go together; missing --coordinator, --process-id"]),
        (
            ["--coordinator", "127.0.0.1:1234", "--num-processes", 2, "--process-id", 2],
            ["--process-id 2 is out of range", "--num-processes 2", "0 to 1"],
        ),
        (
            ["--coordinator", "127.0.0.1:1234", "--num-processes", 0, "--process-id", 0],
            ["--num-processes must be at least 1, got 0"],
        ),
        (
            ["--coordinator", "localhost", "--num-processes", 2, "--process-id", 1],
            ["--coordinator 'localhost' is not HOST:PORT"],
        ),
        (
            ["--coordinator", "h:99999", "--num-processes", 2, "--process-id", 1],
            ["--coordinator 'h:99999' is not HOST:PORT"],
        ),
    ],
)
def test_settings_that_cannot_work_are_refused_before_any_wait(tmp_path, settings, needles):
    result = azx_cli("train", "--out", tmp_path / "run", *settings)
    one_line_error(result, *needles)
    assert not (tmp_path / "run").exists()


def test_a_port_in_use_is_refused_for_process_0(tmp_path):
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = azx_cli(
            "train", "--out", tmp_path / "run",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", 2, "--process-id", 0,
        )  # fmt: skip
    one_line_error(result, f"port {port} is in use on this machine", "choose another port")


def _azx(*args, devices: int = 2) -> subprocess.Popen:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    return subprocess.Popen(
        [sys.executable, "-m", "azx", *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _error_line(process: subprocess.Popen, timeout: float = 120) -> str:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        process.kill()
    lines = [line for line in stderr.splitlines() if not line.startswith("[Gloo]")]
    assert process.returncode == 2, stdout + stderr
    assert len(lines) == 1 and lines[0].startswith("azx: error: "), stderr
    return lines[0]


def _cluster(port: int, process_id: int, processes: int = 2) -> list[str]:
    return ["--coordinator", f"127.0.0.1:{port}", "--num-processes", processes,
            "--process-id", process_id]  # fmt: skip


@pytest.mark.slow  # starts a JAX process that waits out its join timeout
def test_an_unreachable_coordinator_stops_after_the_join_timeout(tmp_path):
    start = time.monotonic()
    process = _azx("train", "--out", tmp_path / "run", *_cluster(_free_port(), 1),
                   "--join-timeout", 3)  # fmt: skip
    line = _error_line(process)
    assert "could not reach the coordinator at 127.0.0.1:" in line, line
    assert "within 3 s (--join-timeout)" in line and "start process 0" in line, line
    assert time.monotonic() - start < 60
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # starts a JAX process that waits out its join timeout
def test_a_coordinator_whose_peers_never_join_stops_after_the_join_timeout(tmp_path):
    process = _azx("train", "--out", tmp_path / "run", *_cluster(_free_port(), 0, 3),
                   "--join-timeout", 3)  # fmt: skip
    line = _error_line(process)
    assert "not all 3 processes joined the coordinator at 127.0.0.1:" in line, line
    assert "each with its own --process-id (0 to 2)" in line, line


@pytest.mark.slow  # starts two JAX processes that join one cluster
def test_processes_started_with_different_options_are_refused(tmp_path):
    port = _free_port()
    pair = [
        _azx("train", "--out", tmp_path / "run", "--seed", seed, *_cluster(port, seed))
        for seed in (0, 1)
    ]
    for process in pair:
        line = _error_line(process)
        assert "process 1 was started with other settings than process 0" in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # starts a JAX process of three devices
def test_games_that_do_not_split_over_the_devices_are_refused(tmp_path):
    line = _error_line(_azx("train", "--out", tmp_path / "run", devices=3))
    assert "training on the 3 devices: num_envs (64) must be divisible by the number of " in line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # starts a JAX process that waits out its join timeout
def test_a_slurm_job_step_of_several_tasks_joins_without_the_settings(tmp_path):
    """Inside `srun` (as its environment variables say), `azx train` starts JAX's
    distributed runtime with JAX's own detection of the job; alone, this task waits for
    its peer only until the join timeout."""
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        SLURM_JOB_ID=str(_free_port()),  # JAX derives the coordinator's port from it
        SLURM_STEP_NODELIST="localhost",
        SLURM_NTASKS="2",
        SLURM_STEP_NUM_TASKS="2",
        SLURM_STEP_NUM_NODES="1",
        SLURM_PROCID="1",
        SLURM_LOCALID="1",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "azx", "train", "--out", tmp_path / "run", "--join-timeout", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = _error_line(process)
    assert "the 2 processes of this cluster job did not all join within 3 s" in line, line
