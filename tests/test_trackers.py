"""`azx train --log tensorboard --log wandb`: what each tracker holds, read back with a
reader that is not azx's (TensorBoard's own event reader; W&B's record format), equals
`metrics.jsonl`. A missing extra is one line naming the pip command.

W&B runs in its offline mode: nothing leaves the machine.
"""

import hashlib
import importlib.util
from pathlib import Path

import pytest

# The dev extra installs both trackers and TensorBoard's own reader: a missing one is a
# broken install, which these imports report, not a reason to skip.
import tensorboard  # noqa: F401
import tensorboardX  # noqa: F401
import wandb  # noqa: F401
from _cli import azx_cli, one_line_error, trained_once

import azx
from azx._trackers import scalars


ITERATIONS = 4
SMALL = ["--preset", "ppo_cartpole", "--iterations", ITERATIONS, "--log-every", 2]
SMALL += ["--eval-every", 2, "--eval-episodes", 4, "--quiet"]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """A 4-iteration ppo_cartpole run logged to both trackers."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        return trained_once(
            tmp_path_factory, "trackers", "--log", "tensorboard", "--log", "wandb", *SMALL
        )


def test_scalars_name_every_number_of_a_record():
    record = {
        "iteration": 10,
        "env_steps": 5120,
        "loss": 0.5,
        "episode_return": None,
        "eval": {"search": {"random": {"score": 0.75, "games": 20, "as_first": [1, 2, 3]}}},
    }
    assert scalars(record) == {
        "train/loss": 0.5,
        "eval/search/random/score": 0.75,
        "eval/search/random/games": 20.0,
    }


# The trackers are extras: what they hold is checked in the slow tier (CI runs it).
@pytest.mark.slow
def test_tensorboard_holds_every_scalar_against_iterations_and_steps(logged):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logged / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    records = azx.run.read_metrics(logged)
    expected = {}  # tag -> {step: value}
    for record in records:
        for name, value in scalars(record).items():
            expected.setdefault(name, {})[record["iteration"]] = value
            expected.setdefault(f"by_env_steps/{name}", {})[record["env_steps"]] = value
    assert "train/loss" in expected and "eval/return_mean" in expected
    assert set(events.Tags()["scalars"]) == set(expected)
    for tag, by_step in expected.items():
        logged_values = {e.step: e.value for e in events.Scalars(tag)}
        assert logged_values == pytest.approx(by_step, rel=1e-6), tag  # float32 in the file
    # The learning curve, each time it was drawn: untrained, and at each evaluation.
    images = events.Images("learning_curve")
    assert [image.step for image in images] == [0, 2, 4]
    assert images[-1].encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_wandb_holds_every_scalar_against_iterations(logged):
    (run_file,) = (logged / "wandb").glob("offline-run-*/run-*.wandb")
    history = {}
    for row in _wandb_history(run_file):
        step = row.pop("_step")
        history[step] = row
    records = azx.run.read_metrics(logged)
    assert sorted(history) == [r["iteration"] for r in records]
    for record in records:
        row = history[record["iteration"]]
        assert row["env_steps"] == record["env_steps"]
        for name, value in scalars(record).items():
            assert row[name] == pytest.approx(value, rel=1e-12), name
    # The learning curve, each time it was drawn; the last one is the run's PNG.
    assert {history[step]["learning_curve/_type"] for step in (0, 2, 4)} == {"image-file"}
    png = hashlib.sha256((logged / "learning_curve.png").read_bytes()).hexdigest()
    assert history[ITERATIONS]["learning_curve/sha256"] == png


def test_a_missing_tracker_package_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec

    def without_tensorboardx(name, *args, **kwargs):
        return None if name == "tensorboardX" else find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_tensorboardx)
    out = tmp_path / "run"
    result = azx_cli("train", "--out", out, "--log", "tensorboard", *SMALL)
    one_line_error(result, "--log tensorboard", "pip install 'azx[tensorboard]'")
    result = azx_cli("train", "--out", out, "--log", "mlflow", *SMALL)
    one_line_error(result, "--log must be tensorboard or wandb, got 'mlflow'")
    assert not out.exists()


def _wandb_history(path: Path) -> list[dict]:
    """The history rows of a W&B run file (`run-ID.wandb`), read without W&B's service:
    a 7-byte header (`:W&B`, magic, version), then LevelDB's log format (32 KiB blocks
    of records: CRC-32 (4 bytes), length (2), type (1: whole, 2: first, 3: middle, 4:
    last), data), each whole record a protocol buffer `Record`."""
    import json

    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    position, pending, rows = 7, b"", []
    while position + 7 <= len(data):
        if 32768 - position % 32768 < 7:  # a block's tail too short for a header: padding
            position += 32768 - position % 32768
            continue
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        kind = data[position + 6]
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind not in (1, 4):
            continue
        record = wandb_internal_pb2.Record()
        record.ParseFromString(pending)
        pending = b""
        if record.WhichOneof("record_type") == "history":
            items = record.history.item
            rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
    return rows
