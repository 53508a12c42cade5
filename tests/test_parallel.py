"""Data parallelism: a 4-device CPU mesh (in a subprocess) trains like one device, and two
processes with two devices each train, checkpoint and resume like one process with four."""

import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np


HERE = pathlib.Path(__file__).parent


def test_four_devices_train_like_one():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    result = subprocess.run(
        [sys.executable, str(HERE / "_sharded_run.py")],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SHARDED OK" in result.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(role: str, directory: pathlib.Path, *args: str) -> subprocess.Popen:
    # A compilation cache shared by the runs: the resuming pair compiles nothing that the
    # first pair did not, which keeps the test at about a minute on two cores.
    env = dict(
        os.environ,
        JAX_COMPILATION_CACHE_DIR=str(directory / "compilation_cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    return subprocess.Popen(
        [sys.executable, str(HERE / "_multihost_run.py"), role, str(directory), *args],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(processes: list[subprocess.Popen], timeout: float) -> None:
    """Wait for every process; kill them all if one fails or time runs out, so a broken
    run (one process waiting on a barrier for a dead peer, say) fails instead of hanging."""
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for process in processes:
            output, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outputs.append(output)
            if process.returncode != 0:
                break
    except subprocess.TimeoutExpired:
        outputs.append(f"timed out after {timeout} s")
    finally:
        for process in processes:
            process.kill()
            process.wait()
    report = "\n".join(outputs)
    assert all(process.returncode == 0 for process in processes), report


def _parameters(path: pathlib.Path) -> list[np.ndarray]:
    with np.load(path) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def test_two_processes_train_checkpoint_and_resume_like_one(tmp_path):
    """Two processes with two CPU devices each train, save, and a fresh pair restores and
    trains on: the parameters match one process with four devices doing the same steps,
    and one process restores the pair's checkpoint onto its own four devices."""
    roles = ("train", "resume")
    for role in roles:
        port = str(_free_port())
        pair = [_start(role, tmp_path, port, str(i)) for i in range(2)]
        if role == "resume":
            pair.append(_start("reference", tmp_path))
        _wait(pair, timeout=300)
    reference = _parameters(tmp_path / "reference.npz")
    for name in ("resume.npz", "restored_on_one.npz"):
        for a, b in zip(reference, _parameters(tmp_path / name), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=name)
    # The tolerance tells runs apart: another seed moves the parameters much further.
    other = _parameters(tmp_path / "other_seed.npz")
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(reference, other)) > 1e-3
