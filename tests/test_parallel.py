"""Data parallelism: a 4-device CPU mesh (in a subprocess) trains like one device, and two
processes with two devices each train, checkpoint and resume like one process with four."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from _four_devices import run_script


# Each test starts several JAX processes and trains in each: the slow tier (`-m slow`).
pytestmark = pytest.mark.slow


HERE = pathlib.Path(__file__).parent


def test_four_devices_train_like_one():
    assert "SHARDED OK" in run_script("_sharded_run.py")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(role: str, directory: pathlib.Path, *args: str) -> subprocess.Popen:
    # The test run's compilation cache (tests/conftest.py), keeping every compile: the
    # resuming pair compiles nothing that the first pair did not.
    env = dict(
        os.environ,
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


# `azx train` on several processes ----------------------------------------------------

_CLUSTER_RUN = ["--iterations", "4", "--eval-every", "2", "--log-every", "1"]
_CLUSTER_RUN += ["--eval-games", "10", "--opponent", "random"]


def _azx(directory: pathlib.Path, devices: int, *args, log: str, stall: int | None = None):
    """`azx ARGS` in a subprocess with `devices` CPU devices, its output in `log`."""
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    if stall is not None:
        env["AZX_TEST_STALL_SAVING"] = str(stall)
    with open(directory / log, "w") as output:
        return subprocess.Popen(
            [sys.executable, str(HERE / "_cluster_run.py"), *map(str, args)],
            cwd=directory,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _pair(directory: pathlib.Path, *args, name: str, stall: int | None = None):
    """Two `azx` processes with two devices each, joined through a local coordinator."""
    port = _free_port()
    return [
        _azx(
            directory,
            2,
            *args,
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            2,
            "--process-id",
            i,
            log=f"{name}{i}.log",
            stall=stall if i == 1 else None,
        )  # fmt: skip
        for i in range(2)
    ]


def _finish(processes, directory: pathlib.Path, logs: list[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for process in processes:
            process.kill()
            process.wait()
    outputs = [(directory / log).read_text() for log in logs]
    assert all(process.returncode == 0 for process in processes), "\n----\n".join(outputs)
    return outputs


def _params(run: pathlib.Path, step: int) -> list[np.ndarray]:
    import jax

    import azx

    return [np.asarray(leaf) for leaf in jax.tree.leaves(azx.load_run(run, step=step).state.params)]


def test_azx_train_on_two_processes_survives_a_kill_and_matches_one(tmp_path):
    """`azx train` on two processes × two CPU devices: killed while saving checkpoint 4,
    checkpoint 2 is the newest listed and restores; `--resume` on a fresh pair trains to
    4; the parameters match one process with one device; only process 0 reports, and only
    it logs to TensorBoard."""
    run, one = tmp_path / "pair", tmp_path / "one"
    # The reference trains on one device, without a mesh: what the sharded run must equal.
    reference = _azx(tmp_path, 1, "train", "--out", one, *_CLUSTER_RUN, "--quiet", log="one.log")
    pair = _pair(tmp_path, "train", "--out", run, *_CLUSTER_RUN, name="first", stall=4)
    try:
        deadline = time.monotonic() + 400
        saving = run / "checkpoints"
        # Process 1 stalls once it has written its part of checkpoint 4, before orbax
        # commits it.
        while "stalled" not in (tmp_path / "first1.log").read_text():
            assert all(p.poll() is None for p in pair), (tmp_path / "first0.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "first0.log").read_text()
            time.sleep(0.05)
        time.sleep(1.0)  # for process 0 to write its part too
    finally:
        for process in pair:  # process 1 first: the one that dies mid-save
            process.send_signal(signal.SIGKILL)
            process.wait()
    import azx

    # Checkpoint 4 was cut off mid-save: its files lie in orbax's temporary directory.
    assert [p.name.split(".")[0] for p in saving.glob("*.orbax-checkpoint-tmp*")] == ["4"]
    checkpoints = azx.checkpoint.Checkpointer(saving)
    assert checkpoints.all_steps() == [2]
    checkpoints.close()
    two = _params(run, 2)

    resumed = _pair(
        tmp_path, "train", "--out", run, "--resume", "--log", "tensorboard", name="resumed"
    )
    out0, out1 = _finish(resumed, tmp_path, ["resumed0.log", "resumed1.log"], timeout=400)
    _finish([reference], tmp_path, ["one.log"], timeout=400)
    assert "resuming at iteration 2" in out0 and "done: 4 iterations" in out0
    assert "iteration" not in out1 and "azx:" not in out1  # process 1 says nothing

    iterations = [record["iteration"] for record in azx.run.read_metrics(run)]
    assert iterations == [0, 1, 2, 3, 4]
    # One writer (process 0's), which logged each resumed iteration's loss once.
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    (events,) = (run / "tensorboard").iterdir()
    losses = [
        event.step
        for event in EventFileLoader(str(events)).Load()
        for value in event.summary.value
        if value.tag == "train/loss"
    ]
    assert losses == [3, 4]
    for mine, theirs in zip(azx.run.read_metrics(run), azx.run.read_metrics(one), strict=True):
        if "loss" in mine:
            assert abs(mine["loss"] - theirs["loss"]) < 1e-5, (mine, theirs)
    for step in (2, 4):
        for a, b in zip(_params(run, step), _params(one, step), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=f"checkpoint {step}")
    # Training moved the parameters far beyond that tolerance.
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(two, _params(run, 4))) > 1e-3
