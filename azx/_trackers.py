"""Experiment trackers for [`azx.run.train`][] (`azx train --log tensorboard --log
wandb`): every scalar of each metrics record, against iterations and environment steps,
and the learning curve's image each time it is drawn.

Private: `azx.run.train` takes the tracker names. Each tracker's package is an optional
extra, imported only when that tracker is asked for.
"""

import abc
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ._errors import RunError


TENSORBOARD_DIR = "tensorboard"
"""The run directory's folder of TensorBoard event files (`tensorboard --logdir RUN`)."""


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of a metrics record under tracker names: `train/NAME` for the
    training call's fields, `eval/...` for its evaluation's (a path through the nested
    results, as `eval/search/random/score`). The record's `iteration` and `env_steps`
    are the x axes, not values; lists, flags and `None` are left out."""
    out: dict[str, float] = {}

    def visit(name: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                visit(f"{name}/{key}", inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)

    for key, value in record.items():
        if key not in ("iteration", "env_steps"):
            visit(key if key == "eval" else f"train/{key}", value)
    return out


def check_trackers(names: Sequence[str]) -> None:
    """`RunError` for an unknown tracker name or one whose package is missing (naming
    the pip command that installs it), before anything is trained or written."""
    import importlib.util

    for name in names:
        if name not in _TRACKERS:
            raise RunError(f"`log` must be {' or '.join(_TRACKERS)}, got {name!r}")
        _, module, extra = _TRACKERS[name]
        if importlib.util.find_spec(module) is None:
            raise RunError(f"`log` {name} needs the {module} package: pip install 'azx[{extra}]'")


class AbstractTracker(abc.ABC):
    """Somewhere a run's metrics go besides `metrics.jsonl`. Made with the run directory
    and its configuration (`config.json`)."""

    @abc.abstractmethod
    def log(self, record: dict[str, Any]) -> None:
        """Log a metrics record's [`scalars`][]."""

    @abc.abstractmethod
    def log_image(self, name: str, path: Path, *, iteration: int) -> None:
        """Log the PNG image at `path` as `name`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Write out everything logged."""


class TensorBoardTracker(AbstractTracker):
    """TensorBoard event files (written by tensorboardX, which needs no TensorFlow) in
    `RUN/tensorboard/`: each scalar at step = iteration, and again as
    `by_env_steps/NAME` at step = environment steps."""

    def __init__(self, out: Path, config: dict[str, Any]):
        import json

        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(out / TENSORBOARD_DIR))
        self.writer.add_text("config", f"```\n{json.dumps(config, indent=2)}\n```")

    def log(self, record):
        iteration, env_steps = record["iteration"], record["env_steps"]
        for name, value in scalars(record).items():
            self.writer.add_scalar(name, value, iteration)
            self.writer.add_scalar(f"by_env_steps/{name}", value, env_steps)
        self.writer.flush()

    def log_image(self, name, path, *, iteration):
        import matplotlib.image
        import numpy as np

        rgba = matplotlib.image.imread(path)  # floats in [0, 1]
        image = np.round(rgba[..., :3] * 255).astype(np.uint8)
        self.writer.add_image(name, image, iteration, dataformats="HWC")
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandbTracker(AbstractTracker):
    """A Weights & Biases run (project `azx`, or `$WANDB_PROJECT`) named after the run
    directory (one per seed, grouped, for several seeds), with its configuration; each
    record at step = iteration, with `env_steps` beside the scalars as a second x axis.
    `WANDB_MODE=offline` keeps it local, in `RUN/wandb/`."""

    def __init__(self, out: Path, config: dict[str, Any]):
        import wandb

        self.wandb = wandb
        # One seed of several (`azx train --seeds N`): named after both directories,
        # grouped with the other seeds.
        several = config.get("seeds", 1) > 1
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "azx"),
            name=f"{out.parent.name}-{out.name}" if several else out.name,
            group=out.parent.name if several else None,
            dir=str(out),
            config=config,
            # azx's progress bar owns the terminal: W&B does not capture (wrap) it.
            settings=wandb.Settings(console="off"),
            # `azx train --seeds N` logs N runs at once, one per seed.
            reinit="create_new",
        )
        self.run.define_metric("env_steps")

    def log(self, record):
        values = scalars(record) | {"env_steps": record["env_steps"]}
        self.run.log(values, step=record["iteration"])

    def log_image(self, name, path, *, iteration):
        self.run.log({name: self.wandb.Image(str(path))}, step=iteration)

    def close(self):
        self.run.finish()


@contextmanager
def open_trackers(
    names: Sequence[str], out: Path, config: dict[str, Any]
) -> Iterator[list[AbstractTracker]]:
    """The trackers `names` for the run in `out` (configured by `config`), closed on
    leaving (also on an error or Ctrl-C, so that what was logged is written)."""
    with ExitStack() as stack:
        trackers: list[AbstractTracker] = []
        for name in dict.fromkeys(names):  # each once, in the order given
            tracker = _TRACKERS[name][0](out, config)
            stack.callback(tracker.close)
            trackers.append(tracker)
        yield trackers


# Tracker name -> (its class, the module it needs, the azx extra that installs it).
_TRACKERS: dict[str, tuple[type[AbstractTracker], str, str]] = {
    "tensorboard": (TensorBoardTracker, "tensorboardX", "tensorboard"),
    "wandb": (WandbTracker, "wandb", "wandb"),
}
