"""Checkpoints: exact resume in a fresh process, atomic saves, clear mismatch errors."""

import pathlib
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _checkpoint_run import large_state
from _trainer_setup import tic_tac_toe

import azx


HERE = pathlib.Path(__file__).parent


def _run(*args):
    result = subprocess.run(
        [sys.executable, str(HERE / "_checkpoint_run.py"), *map(str, args)],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _leaves(state):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(state)
    ]


@pytest.mark.slow
def test_resume_in_a_fresh_process_is_bit_identical(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _run("train", straight, 0, 4)
    _run("train", resumed, 0, 2)
    _run("train", resumed, 2, 4)  # a fresh process: restore checkpoint 2, train 2 more
    _, like = tic_tac_toe(reuse_tree=True, search="puct")
    a = azx.checkpoint.Checkpointer(straight).restore(like, step=4)
    b = azx.checkpoint.Checkpointer(resumed).restore(like, step=4)
    assert int(a.iteration) == 4 and int(b.iteration) == 4
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    # It really trained: the parameters moved away from the initial ones.
    assert any(not np.array_equal(x, y) for x, y in zip(_leaves(a.params), _leaves(like.params)))


def _kill_on(mode: str, directory, line: str, delay: float = 0.0) -> None:
    """Run `_checkpoint_run.py MODE DIRECTORY` and SIGKILL it `delay` seconds after it
    prints `line`."""
    with subprocess.Popen(
        [sys.executable, str(HERE / "_checkpoint_run.py"), mode, str(directory)],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        output = []
        for printed in process.stdout:
            output.append(printed)
            if printed.strip() == line:
                time.sleep(delay)
                process.send_signal(signal.SIGKILL)
                break
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "".join(output)


# Slow tier (a process killed mid-write): the default run checks the atomic writes in
# process (test_run_files' damaged checkpoints and fallbacks).
@pytest.mark.slow
def test_sigkill_during_save_leaves_the_last_checkpoint_restorable(tmp_path):
    # Two complete saves, then a kill right after the third save starts.
    _kill_on("forever", tmp_path, "saving 3", delay=0.05)
    checkpoints = azx.checkpoint.Checkpointer(tmp_path)
    latest = checkpoints.latest_step()
    assert latest in (2, 3)  # 3 only if the save completed before the kill landed
    state, big = checkpoints.restore(large_state(0), step=latest)
    assert int(state.iteration) == latest
    np.testing.assert_array_equal(big, np.full(4_000_000, float(latest), np.float32))


@pytest.mark.slow  # a process killed mid-delete
def test_sigkill_while_deleting_an_old_checkpoint_leaves_only_whole_ones_listed(tmp_path):
    # The old checkpoint leaves the listing in one rename before its files are deleted:
    # a kill half-way through the deletion leaves no half-deleted checkpoint behind.
    _kill_on("stall-deleting", tmp_path, "deleting")
    assert (tmp_path / ".trash" / "1").is_dir()  # the half-deleted one, out of the listing
    checkpoints = azx.checkpoint.Checkpointer(tmp_path, max_to_keep=1)
    assert checkpoints.all_steps() == [2]
    state, big = checkpoints.restore(large_state(0))
    assert int(state.iteration) == 2
    np.testing.assert_array_equal(big, np.full(4_000_000, 2.0, np.float32))
    checkpoints.save(large_state(3), step=3)  # the next save empties the trash
    assert checkpoints.all_steps() == [3] and not (tmp_path / ".trash").exists()


def test_restore_into_another_configuration_names_the_difference(tmp_path):
    _, state = tic_tac_toe(num_envs=8)
    checkpoints = azx.checkpoint.Checkpointer(tmp_path)
    checkpoints.save(state, step=1)
    _, other = tic_tac_toe(num_envs=4)
    with pytest.raises(
        ValueError,
        match=(
            r"(?s)different configuration.*"
            r"\.buffer\.has_target: checkpoint bool\[8, 16\], this configuration bool\[4, 16\]"
        ),
    ):
        checkpoints.restore(other)
    with pytest.raises(FileNotFoundError, match="no checkpoint 7"):
        checkpoints.restore(state, step=7)
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        azx.checkpoint.Checkpointer(tmp_path / "empty").restore(state)


def test_keeps_the_last_k(tmp_path):
    _, state = tic_tac_toe()
    checkpoints = azx.checkpoint.Checkpointer(tmp_path, max_to_keep=2)
    for step in (1, 2, 3):
        checkpoints.save(state, step=step)
    assert checkpoints.all_steps() == [2, 3]


def test_keeps_the_multiples_of_keep_period_besides_the_last_k(tmp_path):
    _, state = tic_tac_toe()
    checkpoints = azx.checkpoint.Checkpointer(tmp_path, max_to_keep=2, keep_period=3)
    for step in range(1, 9):
        checkpoints.save(state, step=step)
    assert checkpoints.all_steps() == [3, 6, 7, 8]
    assert checkpoints.restore(state, step=3).iteration == state.iteration
    with pytest.raises(ValueError, match="keep_period"):
        azx.checkpoint.Checkpointer(tmp_path, keep_period=0)
