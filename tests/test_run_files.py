"""Damaged files and odd paths: every error a user can cause is one line on stderr with
exit status 2, and leaves every file of the run as it was (hashes before and after); a
damaged newest checkpoint falls back to the newest one that reads back intact.

The run under test is the shared 2-iteration tic_tac_toe run (`trained`), copied.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from _cli import SMALL, azx_cli, file_hashes, one_line_error

import azx


# A place no process can create a directory in, root included (sysfs refuses mkdir).
UNWRITABLE = Path("/sys/azx-test-run")


@pytest.fixture
def run(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def _unchanged(directory: Path, *args, input=None):
    """Run `azx ARGS`, asserting that no file under `directory` changed."""
    before = file_hashes(directory)
    result = azx_cli(*args, input=input)
    assert file_hashes(directory) == before, result.output
    return result


def _largest_file(step_dir: Path) -> Path:
    return max((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


# ----------------------------------------------------------------- damaged checkpoints


def test_eval_falls_back_from_a_damaged_newest_checkpoint(run):
    _truncate(_largest_file(run / "checkpoints" / "2"))
    checkpoints = file_hashes(run / "checkpoints")
    result = azx_cli("eval", "--run", run, "--agent", "network", "--games", 2)
    assert result.exit_code == 0, result.output
    (warning,) = result.stderr.strip().splitlines()
    assert (
        warning.startswith("azx: warning: checkpoint 2 in ") and "cannot be read: file" in warning
    )
    assert warning.endswith("; restored checkpoint 1 instead")
    assert "at iteration 1" in result.stdout
    assert file_hashes(run / "checkpoints") == checkpoints  # nothing deleted or moved
    # Asking for the damaged one by number is an error, not a fallback.
    one_line_error(
        _unchanged(run, "eval", "--run", run, "--step", 2), "checkpoint 2", "cannot be read"
    )


# Slow tier (a second training run): the default run checks the same fallback through
# `azx eval` (above) and the checkpointer's (below).
@pytest.mark.slow
def test_resume_falls_back_and_sets_the_damaged_checkpoint_aside(run):
    damaged = run / "checkpoints" / "2"
    _flip(_largest_file(damaged))
    kept = file_hashes(damaged)
    result = azx_cli("train", "--out", run, "--resume", "--iterations", 2, "--quiet", *SMALL)
    assert result.exit_code == 0, result.output
    aside = run / "checkpoints" / "unreadable" / "2"
    flipped = _largest_file(aside).relative_to(aside)
    assert result.stderr.strip().splitlines() == [
        f"azx: warning: checkpoint 2 in {run / 'checkpoints'} cannot be read: file {flipped} "
        "has changed since it was saved (CRC-32 differs); restored checkpoint 1 instead",
        f"azx: warning: moved the unreadable checkpoint 2 to {aside}; training continues "
        "from iteration 1",
    ]
    # The damaged files are kept, byte for byte; the run trained iteration 2 again.
    assert file_hashes(aside) == kept
    assert azx.load_run(run).iteration == 2
    assert [r["iteration"] for r in azx.run.read_metrics(run)] == [0, 1, 2]


def test_no_readable_checkpoint_is_one_line_and_changes_nothing(run):
    for step in ("1", "2"):
        _truncate(_largest_file(run / "checkpoints" / step))
    line = one_line_error(_unchanged(run, "eval", "--run", run), "checkpoint 2", "nor can any")
    assert "1: file " in line
    one_line_error(
        _unchanged(run, "train", "--out", run, "--resume", "--iterations", 3), "cannot be read"
    )


@pytest.mark.parametrize("damage", [_truncate, _flip])
@pytest.mark.parametrize("which", ["largest", "meta/metadata", "state/_METADATA"])
def test_checkpointer_detects_damage_and_falls_back(tmp_path, damage, which):
    # Fault injection on a bare Checkpointer: every damage is caught before orbax reads
    # (a flipped bit in a compressed chunk would otherwise restore as other numbers).
    states = [{"w": np.arange(20_000, dtype=np.float32) * step, "step": np.int32(step)}
              for step in (1, 2)]  # fmt: skip
    checkpoints = azx.checkpoint.Checkpointer(tmp_path)
    for step, state in enumerate(states, 1):
        checkpoints.save(state, step=step)
    newest = tmp_path / "2"
    damage(_largest_file(newest) if which == "largest" else newest / which)
    before = file_hashes(tmp_path)
    with pytest.raises(azx.checkpoint.DamagedCheckpointError, match="checkpoint 2 in .* file "):
        checkpoints.restore(states[0], step=2)
    with pytest.warns(azx.checkpoint.DamagedCheckpointWarning, match="restored checkpoint 1"):
        restored = checkpoints.restore(states[0])
    jax.tree.map(np.testing.assert_array_equal, restored, jax.tree.map(np.asarray, states[0]))
    assert file_hashes(tmp_path) == before


# ----------------------------------------------------------------- corrupt run files


def test_a_corrupt_metrics_line_stops_resume_before_any_change(run):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[1] = lines[1][:20]  # not the last line: not a crash mid-append
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    one_line_error(
        _unchanged(run, "train", "--out", run, "--resume", "--iterations", 3),
        "metrics.jsonl line 2 is not valid JSON",
    )


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda config: config.update(seed="zero"), "seed must be an int, got 'zero'"),
        (lambda config: config["preset"].update(network_options=5), "network_options must be"),
        (lambda config: config["preset"]["config"].update(num_envs="8"), "num_envs"),
        (lambda config: config.pop("preset"), "no 'preset'"),
    ],
)
def test_a_config_with_a_wrong_type_is_one_line(run, edit, needle):
    config = json.loads((run / "config.json").read_text())
    edit(config)
    (run / "config.json").write_text(json.dumps(config))
    one_line_error(_unchanged(run, "eval", "--run", run), "config.json", needle)
    one_line_error(_unchanged(run, "train", "--out", run, "--resume", "--iterations", 3), needle)


def test_a_config_that_is_not_json_is_one_line(run):
    (run / "config.json").write_text('{"seed": 0, "pres')
    one_line_error(_unchanged(run, "eval", "--run", run), "config.json", "not a valid run")


# ----------------------------------------------------------------- paths


def test_bad_out_paths_are_one_line_and_create_nothing(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    for out, needle in [
        (a_file, "is a file, not a directory"),
        (a_file / "run", f"cannot be created: {a_file} is a file"),
        (UNWRITABLE, "cannot be written"),
    ]:
        for extra in ([], ["--resume"]):
            line = one_line_error(_unchanged(tmp_path, "train", "--out", out, *extra), "--out")
            assert needle in line
    assert not UNWRITABLE.exists()


def test_bad_json_paths_are_one_line_before_evaluating(run, tmp_path):
    for path, needle in [
        (UNWRITABLE / "eval.json", "cannot be written"),
        (tmp_path, "is a directory, not a file"),
    ]:
        one_line_error(_unchanged(run, "eval", "--run", run, "--json", path), "--json", needle)


# ----------------------------------------------------------------- input


def test_play_with_closed_or_ended_input(trained):
    # Closed (no standard input at all): nothing to play with, an error before loading.
    closed = subprocess.run(
        ["sh", "-c", 'exec "$0" -m azx.cli play --run "$1" <&-', sys.executable, str(trained)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert closed.returncode == 2, closed.stderr
    assert closed.stderr.strip().splitlines() == [
        "azx: error: azx play reads your moves from standard input, which is closed"
    ]
    # Ended (end of file before the game is over): the person left; exit 0, like quit.
    ended = azx_cli("play", "--run", trained, input="")
    assert ended.exit_code == 0, ended.output
    assert ended.output.rstrip().endswith("input ended; game abandoned.")


def test_usage_errors_with_bad_numbers_are_one_line():
    one_line_error(azx_cli("train", "--iterations", 2.5), "--iterations", "integer")
    one_line_error(azx_cli("eval", "--run", ".", "--games", 0), "--games")
