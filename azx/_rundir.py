"""A run directory on disk (files, configuration, checkpoints) and [`azx.load_run`][].

Private: the public names are re-exported by `azx.run`.
"""

import dataclasses
import json
import os
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from . import _version, ppo, presets
from ._errors import RunError as RunError, one_line
from ._files import write_atomic
from ._trainer import AbstractTrainer
from ._validate import check_positive_int
from .checkpoint import Checkpointer, DamagedCheckpointError
from .envs import AbstractEnv


CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"
CURVE_FILE = "learning_curve.png"
EVAL_DIR = "evals"


# ----------------------------------------------------------------------------- files


def check_writable(path: Path, argument: str, *, file: bool = False) -> None:
    """Raise a `RunError` naming `argument` unless this process can create (or write)
    the directory `path` (with `file`: the file `path`). Leaves nothing behind."""
    if file:
        if path.is_dir():
            raise RunError(f"`{argument}` {path} is a directory, not a file")
        path = path.parent
    elif path.exists() and not path.is_dir():
        raise RunError(f"`{argument}` {path} is a file, not a directory")
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise RunError(f"`{argument}` {path} cannot be created: {existing} is a file")
    try:  # os.access would not see a read-only file system, nor permissions as root
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".azx-probe-"))
    except OSError as error:
        raise RunError(f"`{argument}` {path} cannot be written: {error.strerror}") from None


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write `data` as indented JSON to `path` through a temporary file and a rename."""
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def read_metrics(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a run's `metrics.jsonl` (empty if there are none yet).

    **Raises:** [`azx.run.RunError`][] naming the line if a record (other than a last
    one cut short by a crash, which is dropped) is not a JSON object with an
    `"iteration"`."""
    path = Path(directory) / METRICS_FILE
    if not path.exists():
        return []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise RunError(f"{path} cannot be read: {error}") from None
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    records = []
    for index, (number, line) in enumerate(numbered):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if index == len(numbered) - 1:
                break  # a crash mid-append leaves at most a partial last line: drop it
            raise RunError(f"{path} line {number} is not valid JSON ({error})") from None
        iteration = record.get("iteration") if isinstance(record, dict) else None
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            raise RunError(f"{path} line {number} is not a metrics record with an iteration")
        records.append(record)
    return records


def run_config(preset: presets.Preset, seed: int, seeds: int = 1) -> dict[str, Any]:
    """The `config.json` of a run of `preset` from `seed`; with `seeds` > 1, of a run of
    the seeds `seed, ..., seed + seeds - 1` trained together, each in its own
    subdirectory (see `seed_directories`)."""
    config = {"azx_version": _version.__version__, "seed": seed, "preset": preset.to_dict()}
    return config if seeds == 1 else config | {"seeds": seeds}


def seed_directories(out: Path, config: dict[str, Any]) -> dict[int, Path]:
    """Each seed's run directory of the run in `out` configured by `config`: `out`
    itself for one seed, `out/seed<S>` for each of several."""
    first, count = config["seed"], config.get("seeds", 1)
    if count == 1:
        return {first: out}
    return {seed: out / f"seed{seed}" for seed in range(first, first + count)}


# Preset fields that do not change the trained network: they (and every `eval_*` field,
# of any recipe) may differ between a run and its resumption.
_NOT_TRAINING = {"name", "description", "iterations", "log_every"}


def _training_differences(saved: dict[str, Any], config: dict[str, Any]) -> str:
    """What of the training differs between the configurations `saved` and `config`."""

    def identity(one: dict[str, Any]) -> dict[str, Any]:
        preset = one["preset"].items()
        preset = {k: v for k, v in preset if k not in _NOT_TRAINING and not k.startswith("eval_")}
        return {"seed": one["seed"], "seeds": one.get("seeds", 1), **preset}

    return "; ".join(_differences(identity(saved), identity(config)))


def _differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    names = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            names += _differences(x, y, f"{prefix}{key}.")
        elif x != y:
            names.append(f"{prefix}{key} ({x!r} there, {y!r} here)")
    return names


def _load_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise RunError(f"{directory} is not an azx run: it has no {CONFIG_FILE}")
    try:
        config = json.loads(path.read_text())
        if not isinstance(config, dict):
            raise TypeError("it is not a JSON object")
        seed = config["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        check_positive_int("seeds", config.get("seeds", 1))
        presets.from_dict(config["preset"])
        return config
    except KeyError as error:
        raise RunError(f"{path} is not a valid run configuration: no {error}") from None
    except (OSError, ValueError, TypeError, AttributeError) as error:
        raise RunError(f"{path} is not a valid run configuration: {one_line(error)}") from None


# ----------------------------------------------------------------------------- runs


@dataclasses.dataclass
class Run:
    """A trained run, opened by [`azx.load_run`][]."""

    directory: Path
    preset: presets.Preset
    """The full training setup (environment, network, algorithm, `Config`)."""
    seed: int
    iteration: int
    """Training iterations of the loaded checkpoint."""
    env: AbstractEnv
    trainer: AbstractTrainer
    state: Any
    """The whole training state at `iteration` (an `azx.alphazero.TrainState`,
    `azx.ppo.TrainState` or `azx.muzero.TrainState`: parameters, optimiser, environments,
    and the rest)."""

    @property
    def algorithm(self) -> str:
        """The name of the preset's recipe: `"alphazero"`, `"ppo"` or `"muzero"`."""
        return self.preset.recipe.name

    @property
    def config(self):
        """The run's [`azx.alphazero.Config`][] or [`azx.ppo.Config`][]."""
        return self.preset.config

    @property
    def net(self) -> Any:
        """The trained network, an Equinox module on ONE observation (`jax.vmap` it for
        batches): `(logits, value)`, or for a recurrent PPO network
        `(carry, (logits, value))`."""
        return self.state.net

    def _agent_recipe(self, what: str) -> presets.AbstractAgentRecipe:
        recipe = self.preset.recipe
        if not isinstance(recipe, presets.AbstractAgentRecipe):
            raise RunError(
                f"{what} needs an AlphaZero run; {self.directory} is a {self.algorithm} run"
            )
        return recipe

    def search(self, num_simulations: int | None = None, **options) -> Any:
        """The run's search played greedily (no exploration noise), with its training
        number of simulations unless `num_simulations` is given (AlphaZero runs)."""
        recipe = self._agent_recipe("a search")
        if num_simulations is not None:
            options["num_simulations"] = num_simulations
        return recipe.make_eval_search(**options)

    def agent(self, kind: str = "search", *, num_simulations: int | None = None) -> Any:
        """An arena agent: `"search"` (network + greedy search), `"network"` (argmax of
        the policy, no search) or, for backgammon, `"full-move"` (the value alone over the
        roll's whole moves, [`azx.arena.ValueMoveAgent`][]) (AlphaZero runs)."""
        recipe = self._agent_recipe("an arena agent")
        return recipe.agent(self.net, kind, num_simulations, self.env)

    def play_episodes(
        self, num_episodes: int, *, key, greedy: bool | None = None
    ) -> ppo.EvaluationResult:
        """`num_episodes` episodes of the trained policy: a PPO run's
        ([`azx.ppo.evaluate`][]) greedy or sampled as the preset evaluates unless `greedy`
        is given; a single-player MuZero run's by its search ([`azx.muzero.evaluate`][]),
        its exploration off unless `greedy=False`."""
        try:
            return self.preset.recipe.play_episodes(
                self.trainer, self.state, num_episodes, key=key, greedy=greedy
            )
        except RunError as error:
            raise RunError(f"{error} ({self.directory})") from None

    def metrics(self) -> list[dict[str, Any]]:
        """The records of `metrics.jsonl`."""
        return read_metrics(self.directory)


def split_checkpoint_spec(spec: str) -> tuple[str, int | None]:
    """`"DIR@ITERATION"` as `(DIR, ITERATION)`, `"DIR"` as `(DIR, None)`: the newest. Only
    digits after the last `@` make an iteration; otherwise the `@` is part of the path."""
    directory, at, step = spec.rpartition("@")
    if at and step.isdigit():
        return directory, int(step)
    return spec, None


def load_run(directory: str | os.PathLike, *, step: int | None = None) -> Run:
    """Open the run in `directory` at checkpoint `step` (default: the newest).

    Without `step`, a damaged newest checkpoint is skipped for the newest one that reads
    back intact, with an [`azx.checkpoint.DamagedCheckpointWarning`][].

    **Raises:** [`azx.run.RunError`][] if the directory holds no run, no checkpoint, or
    no readable one (or `step` is missing or damaged).
    """
    directory = Path(directory)
    config = _load_config(directory)
    if config.get("seeds", 1) > 1:
        listed = ", ".join(str(d) for d in seed_directories(directory, config).values())
        raise RunError(
            f"{directory} holds {config['seeds']} seeds' runs: load one of {listed} "
            "(or all with azx.run.load_runs)"
        )
    preset = presets.from_dict(config["preset"])
    if _latest_step(directory) is None:
        raise RunError(f"{directory} has no checkpoint yet")
    trainer, like = build(preset, [config["seed"]])
    state, _ = restore(directory, like, step)
    return Run(directory, preset, config["seed"], int(state.iteration), trainer.env, trainer, state)


def read_preset(directory: str | os.PathLike) -> presets.Preset:
    """The preset of the run in `directory`, from its `config.json` alone (no checkpoint
    is read): to check options before loading the run."""
    return presets.from_dict(_load_config(Path(directory))["preset"])


def load_runs(directory: str | os.PathLike, *, step: int | None = None) -> list[Run]:
    """Every seed's run in `directory` (written by `azx train --seeds N`, or one run: a
    list of one), each at checkpoint `step` (default: its newest), by seed.

    **Raises:** [`azx.run.RunError`][] as [`azx.load_run`][] does, for any of them.
    """
    config = _load_config(Path(directory))
    directories = seed_directories(Path(directory), config).values()
    return [load_run(path, step=step) for path in directories]


def _latest_step(out: Path) -> int | None:
    if not (out / CHECKPOINT_DIR).exists():
        return None  # (without creating anything)
    with open_checkpoints(out) as manager:
        return manager.latest_step()


def restore(out: Path, like, step: int | None = None) -> tuple[Any, dict[str, Any]]:
    """The state and meta of checkpoint `step` of the run in `out` (default: the newest
    that reads back intact); any failure is a `RunError`."""
    with open_checkpoints(out) as checkpoints:
        try:
            state = checkpoints.restore(like, step=step)
            return state, checkpoints.meta(int(state.iteration))
        except (FileNotFoundError, DamagedCheckpointError) as error:
            raise RunError(str(error)) from None
        except ValueError as error:  # saved from another configuration: name one array
            first, *differences = str(error).splitlines()
            example = f"; {differences[0].strip()}" if differences else ""
            raise RunError(first.rstrip(":") + example) from None


def resumable_config(out: Path, explicit: dict[str, Any]) -> dict[str, Any]:
    """The saved configuration of the run in `out`, checked against explicit options."""
    if not (out / CONFIG_FILE).exists():
        raise RunError(f"`resume`: {out} holds no run to resume (no {CONFIG_FILE})")
    saved = _load_config(out)
    for directory in seed_directories(out, saved).values():
        if _latest_step(directory) is None:
            raise RunError(
                f"`resume`: no checkpoint in {directory / CHECKPOINT_DIR}; start the run "
                "again instead"
            )
    conflicts = [
        f"`{name}` {value!r} (the run has {saved_value!r})"
        for name, value, saved_value in (
            ("preset", explicit.get("preset"), saved["preset"]["name"]),
            ("env", explicit.get("env"), saved["preset"]["env"]),
            ("seed", explicit.get("seed"), saved["seed"]),
            ("seeds", explicit.get("seeds"), saved.get("seeds", 1)),
        )
        if value is not None and value != saved_value
    ]
    if conflicts:
        raise RunError(
            f"`resume` continues {out} as configured; conflicting: {', '.join(conflicts)}"
        )
    return saved


def check_same_training(out: Path, saved: dict[str, Any], config: dict[str, Any], what: str):
    """`RunError` naming `what` where `config` would train otherwise than the run in `out`,
    configured by `saved`, was trained (only its length and evaluations may differ)."""
    differences = _training_differences(saved, config)
    if differences:
        raise RunError(
            f"`resume` continues {out} as configured; `{what}` would change {differences}"
        )


def check_fresh_directory(out: Path, config: dict[str, Any]) -> None:
    """Refuse to start `config` in `out` if that would overwrite or mix with a saved run."""
    if (out / CONFIG_FILE).exists():
        saved = _load_config(out)
        differences = _training_differences(saved, config)
        if differences:
            raise RunError(
                f"{out} holds a run with a different configuration ({differences}); "
                "choose another `out`, or `resume` to continue that run"
            )
        for directory in seed_directories(out, saved).values():
            latest = _latest_step(directory)
            if latest is not None:
                raise RunError(
                    f"{out} already holds this run (checkpoint at iteration {latest}); "
                    "`resume` to continue it, or choose another `out`"
                )
    elif out.exists() and any(out.iterdir()):
        raise RunError(f"{out} is not empty and holds no azx run; choose another `out`")


def open_checkpoints(out: Path, keep_period: int | None = None) -> closing[Checkpointer]:
    """The checkpoints of the run in `out`, closed at the end of a `with` block."""
    directory = out / CHECKPOINT_DIR
    if directory.exists() and not directory.is_dir():
        raise RunError(f"{directory} should hold the run's checkpoints but is a file")
    return closing(Checkpointer(directory, keep_period=keep_period))


def build(preset: presets.Preset, seeds: list[int], *, vmap: bool = False):
    """The preset's trainer and the initial state of one seed (of several: stacked, see
    [`azx.presets.Preset.build_seeds`][]); a preset that cannot be built here (an
    environment whose package is missing, say) is a `RunError`."""
    try:
        if len(seeds) == 1:
            return preset.build(seed=seeds[0])
        return preset.build_seeds(seeds, vmap=vmap)
    except (ValueError, TypeError, KeyError, ImportError) as error:
        raise RunError(f"preset {preset.name!r}: {one_line(error)}") from None
