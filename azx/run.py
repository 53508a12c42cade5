"""Training runs on disk: what `azx train` writes, `azx eval` reads and `load_run` opens.

A run directory holds

- `config.json`: the seed and the full preset the run was trained with
  ([`azx.presets.Preset`][] for AlphaZero, [`azx.presets.PPOPreset`][] for PPO);
- `metrics.jsonl`: one JSON object per logged iteration (losses, throughput and, where an
  evaluation ran, its results);
- `checkpoints/`: orbax checkpoints of the whole training state (the last three);
- `learning_curve.png`: losses and evaluation scores (AlphaZero) or returns (PPO) over
  training;
- `evals/`: results written by `azx eval`.

    run = azx.load_run("runs/tic_tac_toe-seed0")
    logits, value = run.net(observation)          # one observation
    result = azx.arena.play_match(run.env, run.agent(), azx.arena.RandomAgent(),
                                  num_games=100, key=jax.random.key(0))

    run = azx.load_run("runs/ppo_cartpole-seed0")
    result = run.play_episodes(100, key=jax.random.key(0))   # an azx.ppo.EvaluationResult
"""

import dataclasses
import json
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np

from . import arena, ppo, presets
from ._trainer import AbstractTrainer
from .checkpoint import Checkpointer
from .envs import AbstractEnv


__all__ = [
    "Run",
    "RunError",
    "evaluate",
    "evaluate_policy",
    "load_run",
    "match_record",
    "return_record",
    "train",
]

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"
CURVE_FILE = "learning_curve.png"
EVAL_DIR = "evals"
CHECKPOINT_SECONDS = 300.0
"""Save at least this often (besides every evaluation), so that a crash loses little."""
_EVAL_STREAM = 1  # key streams of a run's seed: training uses the seed's key itself


class RunError(ValueError):
    """Bad input for a run (unknown preset, missing checkpoint, conflicting directory...).
    The command line prints it as one line and exits with status 2."""


# ----------------------------------------------------------------------------- files


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_json(path: Path, data: Any) -> None:
    _write_atomic(path, json.dumps(data, indent=2) + "\n")


def read_metrics(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a run's `metrics.jsonl` (empty if there are none yet)."""
    path = Path(directory) / METRICS_FILE
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines) - 1:
                raise
            # A crash mid-append leaves at most a partial last line: drop it.
    return records


def _run_config(preset: presets.AnyPreset, seed: int) -> dict[str, Any]:
    from . import __version__

    return {"azx_version": __version__, "seed": seed, "preset": preset.to_dict()}


# What changes the trained network; the rest (length, evaluation, logging) may differ
# between a run and its resumption.
_NOT_TRAINING = {"name", "description", "iterations", "eval_opponents", "eval_agents",
                 "eval_every", "eval_games", "eval_episodes", "eval_greedy",
                 "log_every"}  # fmt: skip


def _training_identity(config: dict[str, Any]) -> dict[str, Any]:
    preset = {k: v for k, v in config["preset"].items() if k not in _NOT_TRAINING}
    return {"seed": config["seed"], **preset}


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
    if not path.exists():
        raise RunError(f"{directory} is not an azx run: it has no {CONFIG_FILE}")
    try:
        config = json.loads(path.read_text())
        presets.from_dict(config["preset"])
        return config
    except (ValueError, KeyError, TypeError) as error:
        raise RunError(f"{path} is not a valid run configuration: {error}") from None


# ----------------------------------------------------------------------------- runs


@dataclasses.dataclass
class Run:
    """A trained run, opened by [`azx.load_run`][]."""

    directory: Path
    preset: presets.AnyPreset
    """The full training setup (environment, network, algorithm, `Config`)."""
    seed: int
    iteration: int
    """Training iterations of the loaded checkpoint."""
    env: AbstractEnv
    trainer: AbstractTrainer
    state: Any
    """The whole training state at `iteration` (an `azx.alphazero.TrainState` or an
    `azx.ppo.TrainState`: parameters, optimiser, environments, and the rest)."""

    @property
    def algorithm(self) -> str:
        """`"alphazero"` or `"ppo"`."""
        return self.preset.algorithm

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

    def _alphazero_only(self, what: str) -> None:
        if self.algorithm != "alphazero":
            raise RunError(
                f"{what} needs an AlphaZero run; {self.directory} is a {self.algorithm} run"
            )

    def search(self, num_simulations: int | None = None, **options) -> Any:
        """The run's search played greedily (no exploration noise), with its training
        number of simulations unless `num_simulations` is given (AlphaZero runs)."""
        self._alphazero_only("a search")
        if num_simulations is not None:
            options["num_simulations"] = num_simulations
        return self.preset.make_eval_search(**options)

    def agent(self, kind: str = "search", *, num_simulations: int | None = None) -> Any:
        """An arena agent: `"search"` (network + greedy search) or `"network"` (argmax of
        the policy, no search) (AlphaZero runs)."""
        self._alphazero_only("an arena agent")
        if kind == "network":
            return arena.NetworkAgent(self.net)
        if kind == "search":
            return arena.SearchAgent(self.net, self.search(num_simulations))
        raise RunError(f"agent must be 'search' or 'network', got {kind!r}")

    def play_episodes(
        self, num_episodes: int, *, key, greedy: bool | None = None
    ) -> ppo.EvaluationResult:
        """`num_episodes` episodes of the trained policy ([`azx.ppo.evaluate`][]), greedy
        or sampled as the preset evaluates unless `greedy` is given (PPO runs)."""
        if self.algorithm != "ppo":
            raise RunError(f"episodes need a PPO run; {self.directory} is an AlphaZero run")
        greedy = self.preset.eval_greedy if greedy is None else greedy
        return _play_episodes(self.trainer, self.state, num_episodes, key, greedy)

    def metrics(self) -> list[dict[str, Any]]:
        """The records of `metrics.jsonl`."""
        return read_metrics(self.directory)


def load_run(directory: str | os.PathLike, *, step: int | None = None) -> Run:
    """Open the run in `directory` at checkpoint `step` (default: the newest).

    **Raises:** [`azx.run.RunError`][] if the directory holds no run or no checkpoint.
    """
    directory = Path(directory)
    config = _load_config(directory)
    preset = presets.from_dict(config["preset"])
    with _checkpointer(directory) as checkpoints:
        if checkpoints.latest_step() is None:
            raise RunError(f"{directory} has no checkpoint yet")
        trainer, like = _build(preset, config["seed"])
        try:
            state = checkpoints.restore(like, step=step)
        except FileNotFoundError as error:
            raise RunError(str(error)) from None
    return Run(
        directory=directory,
        preset=preset,
        seed=config["seed"],
        iteration=int(state.iteration),
        env=trainer.env,
        trainer=trainer,
        state=state,
    )


# ----------------------------------------------------------------------------- evaluation


def match_record(result: arena.MatchResult) -> dict[str, Any]:
    """A match's counts, score and 95% interval as a JSON-ready dict."""
    low, high = result.score_interval()
    return {
        "games": result.num_games,
        "wins": result.wins,
        "draws": result.draws,
        "losses": result.losses,
        "as_first": list(result.as_first),
        "as_second": list(result.as_second),
        "score": result.score,
        "score_low": low,
        "score_high": high,
        "unfinished": result.num_unfinished,
    }


_play_match = eqx.filter_jit(arena.play_match)


def evaluate(
    env: AbstractEnv,
    agents: dict[str, arena.AbstractAgent],
    opponents: Sequence[str],
    *,
    num_games: int,
    key,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Play every agent against every opponent spec (see [`azx.arena.opponent`][]).

    **Returns:** `{agent_name: {opponent_spec: match_record}}`.
    """
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name, agent in agents.items():
        results[name] = {}
        for index, spec in enumerate(opponents):
            result = _play_match(
                env,
                agent,
                arena.opponent(spec, env),
                num_games=num_games,
                key=jax.random.fold_in(key, index),
            )
            results[name][spec] = match_record(result)
    return results


def _play_episodes(trainer, state, num_episodes: int, key, greedy: bool):
    stats = state.observation_stats if trainer.config.normalize_observations else None
    return _evaluate_episodes(
        trainer.env,
        state.net,
        num_episodes=num_episodes,
        key=key,
        greedy=greedy,
        observation_stats=stats,
    )


_evaluate_episodes = eqx.filter_jit(ppo.evaluate)


def return_record(result: ppo.EvaluationResult, *, greedy: bool) -> dict[str, Any]:
    """Episode returns summarised as a JSON-ready dict: mean, 95% interval, lengths."""
    low, high = result.return_interval()
    return {
        "episodes": int(result.returns.shape[0]),
        "greedy": greedy,
        "return_mean": result.mean_return(),
        "return_low": low,
        "return_high": high,
        "return_min": float(np.min(result.returns)),
        "return_max": float(np.max(result.returns)),
        "length_mean": float(np.mean(result.lengths)),
        "unfinished": int(np.sum(~np.asarray(result.finished))),
    }


def evaluate_policy(trainer, state, *, num_episodes: int, key, greedy: bool) -> dict[str, Any]:
    """A PPO run's policy over `num_episodes` episodes, as a [`return_record`][]."""
    result = _play_episodes(trainer, state, num_episodes, key, greedy)
    return return_record(result, greedy=greedy)


def describe_return(record: dict[str, Any]) -> str:
    """Mean return with its 95% interval and the mean length, on one line."""
    unfinished = f", {record['unfinished']} unfinished" if record["unfinished"] else ""
    return (
        f"return {record['return_mean']:.3f} [{record['return_low']:.3f}, "
        f"{record['return_high']:.3f}] over {record['episodes']} episodes "
        f"({'greedy' if record['greedy'] else 'sampled'}), mean length "
        f"{record['length_mean']:.1f}{unfinished}"
    )


def describe(record: dict[str, Any]) -> str:
    """`W/D/L` with per-colour counts and the score's 95% interval, on one line."""
    first, second = record["as_first"], record["as_second"]
    return (
        f"W/D/L {record['wins']}/{record['draws']}/{record['losses']} of {record['games']} "
        f"(first {'/'.join(map(str, first))}, second {'/'.join(map(str, second))}), "
        f"score {record['score']:.3f} [{record['score_low']:.3f}, {record['score_high']:.3f}]"
    )


# ----------------------------------------------------------------------------- plot


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_return_curve(records: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """A PPO run's returns (left: training episodes, and evaluations with 95% intervals)
    and losses (right) against environment steps."""
    plt = _pyplot()
    figure, (returns, losses) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    trained = [r for r in records if r.get("episode_return") is not None]
    returns.plot(
        [r["env_steps"] for r in trained],
        [r["episode_return"] for r in trained],
        label="training episodes",
    )
    evaluated = [r for r in records if "eval" in r]
    if evaluated:
        means = [r["eval"]["return_mean"] for r in evaluated]
        returns.errorbar(
            [r["env_steps"] for r in evaluated],
            means,
            yerr=[
                [m - r["eval"]["return_low"] for m, r in zip(means, evaluated)],
                [r["eval"]["return_high"] - m for m, r in zip(means, evaluated)],
            ],
            marker="o",
            capsize=3,
            label="evaluation (95% interval)",
        )
    returns.set(xlabel="environment steps", ylabel="episode return", title="return")
    if records:
        returns.legend(fontsize="small")
    steps = [r["env_steps"] for r in records]
    for name in ("policy_loss", "value_loss", "entropy"):
        losses.plot(steps, [r[name] for r in records], label=name)
    losses.set(xlabel="environment steps", title="losses (means over each logged call)")
    if records:
        losses.legend(fontsize="small")
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_learning_curve(records: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Losses (left) and evaluation scores with 95% intervals (right) against iteration."""
    plt = _pyplot()
    figure, (losses, scores) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    iterations = [r["iteration"] for r in records]
    for name in ("loss", "policy_loss", "value_loss"):
        losses.plot(iterations, [r[name] for r in records], label=name)
    losses.set(xlabel="iteration", ylabel="loss", title="training loss")
    if records:
        losses.legend()
    evaluated = [r for r in records if "eval" in r]
    series = sorted({(a, o) for r in evaluated for a in r["eval"] for o in r["eval"][a]})
    for agent, spec in series:
        points = [
            (r["iteration"], r["eval"][agent][spec])
            for r in evaluated
            if spec in r["eval"].get(agent, {})
        ]
        x = [i for i, _ in points]
        y = [p["score"] for _, p in points]
        lower = [p["score"] - p["score_low"] for _, p in points]
        upper = [p["score_high"] - p["score"] for _, p in points]
        scores.errorbar(
            x, y, yerr=[lower, upper], marker="o", capsize=3, label=f"{agent} vs {spec}"
        )
    scores.set(
        xlabel="iteration",
        ylabel="score (win = 1, draw = 1/2)",
        title="evaluation (95% intervals)",
        ylim=(-0.02, 1.02),
    )
    if series:
        scores.legend(fontsize="small")
    figure.savefig(path, dpi=100)
    plt.close(figure)


# ----------------------------------------------------------------------------- training


def _select_preset(preset: str | None, env: str | None) -> presets.AnyPreset:
    if preset is not None:
        try:
            chosen = presets.get(preset)
        except ValueError as error:
            raise RunError(str(error)) from None
        if env is not None and env != chosen.env:
            raise RunError(
                f"--env {env!r} does not match preset {preset!r}, which plays {chosen.env!r}"
            )
        return chosen
    env = env or "tic_tac_toe"
    matching = [name for name in presets.names() if presets.get(name).env == env]
    if not matching:
        games = ", ".join(sorted({presets.get(name).env for name in presets.names()}))
        raise RunError(f"unknown env {env!r}: games with a preset are {games}")
    return presets.get(matching[0])


@contextmanager
def _interruptible() -> Iterator[Callable[[], bool]]:
    """While inside, the first Ctrl-C only raises a flag (checked between training calls);
    a second one interrupts at once."""
    stop = []

    def handler(signum, frame):
        if stop:
            raise KeyboardInterrupt
        stop.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, no clean stop
        yield lambda: False
        return
    try:
        yield lambda: bool(stop)
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclasses.dataclass
class _Reporter:
    """Progress output: a rich progress bar on a terminal, plain lines otherwise."""

    total: int
    start: int
    quiet: bool = False

    def __post_init__(self):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True, quiet=self.quiet)
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task("train", total=self.total, completed=self.start, info="")

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def log(self, message: str) -> None:
        self.progress.console.print(message, highlight=False, soft_wrap=True)

    def advance(self, iteration: int, info: str) -> None:
        self.progress.update(self.task, completed=iteration, info=info)


def _latest_step(out: Path) -> int | None:
    with _checkpointer(out) as manager:
        return manager.latest_step()


def _resumable_config(out: Path, explicit: dict[str, Any]) -> dict[str, Any]:
    """The saved configuration of the run in `out`, checked against explicit options."""
    if not (out / CONFIG_FILE).exists():
        raise RunError(f"--resume: {out} holds no run to resume (no {CONFIG_FILE})")
    saved = _load_config(out)
    if _latest_step(out) is None:
        raise RunError(
            f"--resume: no checkpoint in {out / CHECKPOINT_DIR}; start it again without --resume"
        )
    conflicts = [
        f"--{name} {value!r} (the run has {saved_value!r})"
        for name, value, saved_value in (
            ("preset", explicit.get("preset"), saved["preset"]["name"]),
            ("env", explicit.get("env"), saved["preset"]["env"]),
            ("seed", explicit.get("seed"), saved["seed"]),
        )
        if value is not None and value != saved_value
    ]
    if conflicts:
        raise RunError(
            f"--resume continues {out} as configured; conflicting: {', '.join(conflicts)}"
        )
    return saved


def _check_fresh_directory(out: Path, config: dict[str, Any]) -> None:
    """Refuse to start `config` in `out` if that would overwrite or mix with a saved run."""
    if (out / CONFIG_FILE).exists():
        saved = _load_config(out)
        differences = _differences(_training_identity(saved), _training_identity(config))
        if differences:
            raise RunError(
                f"{out} holds a run with a different configuration ({'; '.join(differences)}); "
                "choose another --out, or pass --resume to continue that run"
            )
        latest = _latest_step(out)
        if latest is not None:
            raise RunError(
                f"{out} already holds this run (checkpoint at iteration {latest}); "
                "pass --resume to continue it, or choose another --out"
            )
    elif out.exists() and any(out.iterdir()):
        raise RunError(f"{out} is not empty and holds no azx run; choose another --out")


@contextmanager
def _checkpointer(out: Path) -> Iterator[Checkpointer]:
    manager = Checkpointer(out / CHECKPOINT_DIR)
    try:
        yield manager
    finally:
        manager.close()


def train(
    out: str | os.PathLike | None = None,
    *,
    preset: str | None = None,
    env: str | None = None,
    seed: int | None = None,
    resume: bool = False,
    iterations: int | None = None,
    eval_every: int | None = None,
    eval_games: int | None = None,
    eval_episodes: int | None = None,
    opponents: Sequence[str] | None = None,
    log_every: int | None = None,
    quiet: bool = False,
) -> Run:
    """Train a preset into the run directory `out` (what `azx train` does).

    Logs `metrics.jsonl` every `log_every` iterations, evaluates and checkpoints every
    `eval_every` iterations (and at least every five minutes, and at the end), and draws
    `learning_curve.png`. A first Ctrl-C stops after the running training call, saves a
    checkpoint and raises `KeyboardInterrupt`; `resume=True` continues from the newest
    checkpoint exactly as if the run had not stopped.

    Options left as `None` take the preset's values (or, with `resume`, the run's).
    `eval_games` and `opponents` apply to AlphaZero presets, `eval_episodes` to PPO ones.

    **Returns:** the trained [`azx.run.Run`][].

    **Raises:** [`azx.run.RunError`][] for an unknown preset or env, an option the
    preset's algorithm does not have, a directory holding a different run (unless
    `resume`), or `resume` without a checkpoint.
    """
    explicit = {"preset": preset, "env": env, "seed": seed}
    if resume:
        if out is None:
            raise RunError("--resume needs --out, the run directory to continue")
        out = Path(out)
        config = _resumable_config(out, explicit)
        chosen = presets.from_dict(config["preset"])
    else:
        chosen = _select_preset(preset, env)
        seed = 0 if seed is None else seed
        out = Path(out) if out is not None else Path("runs") / f"{chosen.name}-seed{seed}"
        config = _run_config(chosen, seed)
        _check_fresh_directory(out, config)
    overrides = {"iterations": iterations, "eval_every": eval_every, "log_every": log_every}
    by_algorithm = {
        "alphazero": {
            "eval_games": eval_games,
            "eval_opponents": None if opponents is None else tuple(opponents),
        },
        "ppo": {"eval_episodes": eval_episodes},
    }
    for algorithm, options in by_algorithm.items():
        if algorithm == chosen.algorithm:
            overrides |= options
            continue
        given = [name for name, value in options.items() if value is not None]
        if given:
            flags = ", ".join("--" + _FLAGS.get(name, name).replace("_", "-") for name in given)
            raise RunError(
                f"{flags} applies to {algorithm} presets; {chosen.name} is a "
                f"{chosen.algorithm} preset"
            )
    try:
        chosen = dataclasses.replace(
            chosen, **{k: v for k, v in overrides.items() if v is not None}
        )
    except ValueError as error:
        raise RunError(str(error)) from None
    seed = config["seed"]
    trainer, state = _build(chosen, seed)
    if chosen.algorithm == "alphazero":
        for spec in chosen.eval_opponents:
            try:
                arena.opponent(spec, trainer.env)
            except ValueError as error:
                raise RunError(str(error)) from None
        if chosen.eval_games % 2:
            raise RunError(
                "eval_games must be even (half the games with each colour), got "
                f"{chosen.eval_games}"
            )

    out.mkdir(parents=True, exist_ok=True)
    config = dict(config, preset=chosen.to_dict())
    _write_json(out / CONFIG_FILE, config)
    records: list[dict[str, Any]] = []
    elapsed_before = 0.0
    with _checkpointer(out) as checkpoints:
        if resume:
            state = checkpoints.restore(state)
            elapsed_before = float(checkpoints.meta().get("elapsed_s", 0.0))
            records = [r for r in read_metrics(out) if r["iteration"] <= int(state.iteration)]
        _write_atomic(out / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in records))
        state = _train_loop(
            out, chosen, trainer, state, checkpoints, records, elapsed_before, seed, quiet
        )
    return Run(
        directory=out,
        preset=chosen,
        seed=seed,
        iteration=int(state.iteration),
        env=trainer.env,
        trainer=trainer,
        state=state,
    )


_FLAGS = {"eval_opponents": "opponent"}


def _build(preset: presets.AnyPreset, seed: int):
    """The preset's trainer and initial state; a preset that cannot be built here (an
    environment whose package is missing, say) is a `RunError`."""
    try:
        return preset.build(seed=seed)
    except (ValueError, ImportError) as error:
        raise RunError(f"preset {preset.name!r}: {error}") from None


def _mean(values) -> float:
    return float(np.mean(np.asarray(values)))


def _record(preset, trainer, state, history, steps: int, seconds: float) -> dict[str, Any]:
    """The metrics record of one training call of `steps` iterations (`history`: every
    iteration's metrics)."""
    iteration = int(state.iteration)
    record: dict[str, Any] = {
        "iteration": iteration,
        "env_steps": iteration * trainer.env_steps_per_iteration,
    }
    rate = steps * trainer.env_steps_per_iteration / seconds
    metrics = state.metrics
    if preset.algorithm == "alphazero":
        return record | {
            "loss": float(metrics.loss),
            "policy_loss": float(metrics.policy_loss),
            "value_loss": float(metrics.value_loss),
            "selfplay_steps_per_s": rate,
        }
    episodes = np.asarray(history.episodes)
    finished = int(np.sum(episodes))
    names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    names += ("explained_variance",)
    record |= {name: _mean(getattr(history, name)) for name in names}
    return record | {
        "learning_rate": float(metrics.learning_rate),
        "episodes": finished,
        # Means over the episodes that ended during the call; None if none did.
        "episode_return": float(np.sum(episodes * np.asarray(history.episode_return))) / finished
        if finished
        else None,
        "episode_length": float(np.sum(episodes * np.asarray(history.episode_length))) / finished
        if finished
        else None,
        "steps_per_s": rate,
    }


def _evaluate_now(preset, trainer, state, key) -> dict[str, Any]:
    if preset.algorithm == "ppo":
        return evaluate_policy(
            trainer, state, num_episodes=preset.eval_episodes, key=key, greedy=preset.eval_greedy
        )
    agents = {}
    for kind in preset.eval_agents:
        agents[kind] = (
            arena.NetworkAgent(state.net)
            if kind == "network"
            else arena.SearchAgent(state.net, preset.make_eval_search())
        )
    return evaluate(
        trainer.env, agents, preset.eval_opponents, num_games=preset.eval_games, key=key
    )


def _evaluation_lines(preset, iteration: int, results: dict[str, Any]) -> list[str]:
    if preset.algorithm == "ppo":
        return [f"iteration {iteration}: {describe_return(results)}"]
    return [
        f"iteration {iteration}: {agent} vs {spec}: {describe(result)}"
        for agent, by_opponent in results.items()
        for spec, result in by_opponent.items()
    ]


def _progress(preset, record: dict[str, Any]) -> str:
    if preset.algorithm == "ppo":
        episode_return = record["episode_return"]
        shown = "-" if episode_return is None else f"{episode_return:.3g}"
        return f"return {shown} | {record['steps_per_s']:.0f} steps/s"
    return f"loss {record['loss']:.3f} | {record['selfplay_steps_per_s']:.0f} moves/s"


def _plot(preset, records, path) -> None:
    if preset.algorithm == "ppo":
        plot_return_curve(records, path)
    else:
        plot_learning_curve(records, path)


def _train_loop(out, preset, trainer, state, checkpoints, records, elapsed_before, seed, quiet):
    chunk = min(preset.log_every, preset.iterations)
    first = int(state.iteration)
    eval_key = jax.random.fold_in(jax.random.key(seed), _EVAL_STREAM)
    train_fn = eqx.filter_jit(trainer.train_and_record)
    started = time.perf_counter()
    last_save = started

    def elapsed():
        return elapsed_before + time.perf_counter() - started

    def save(state):
        iteration = int(state.iteration)
        checkpoints.save(
            state, step=iteration, meta={"iteration": iteration, "elapsed_s": elapsed()}
        )

    with _Reporter(preset.iterations, first, quiet) as report, _interruptible() as stopped:
        if first >= preset.iterations:
            report.log(f"{out}: already trained {first} of {preset.iterations} iterations")
            return state
        report.log(
            f"{preset.description or preset.name}: {preset.iterations} iterations, seed {seed}, "
            f"writing to {out}" + (f" (resuming at iteration {first})" if first else "")
        )
        compile_start = time.perf_counter()
        step_chunk = train_fn.lower(state, chunk).compile()
        report.log(f"compiled the training step in {time.perf_counter() - compile_start:.1f}s")
        iteration = first
        interrupted = False
        while iteration < preset.iterations:
            n = min(chunk, preset.iterations - iteration)
            tick = time.perf_counter()
            state, history = step_chunk(state, n) if n == chunk else train_fn(state, n)
            state = jax.block_until_ready(state)
            seconds = time.perf_counter() - tick
            previous, iteration = iteration, int(state.iteration)
            record = _record(preset, trainer, state, history, n, seconds)
            record["elapsed_s"] = elapsed()
            finished = iteration >= preset.iterations
            due = finished or previous // preset.eval_every != iteration // preset.eval_every
            if due:
                key = jax.random.fold_in(eval_key, iteration)
                record["eval"] = _evaluate_now(preset, trainer, state, key)
                for line in _evaluation_lines(preset, iteration, record["eval"]):
                    report.log(line)
            records.append(record)
            with open(out / METRICS_FILE, "a") as file:
                file.write(json.dumps(record) + "\n")
            interrupted = stopped()
            if due or interrupted or time.perf_counter() - last_save > CHECKPOINT_SECONDS:
                save(state)
                last_save = time.perf_counter()
            if due or interrupted:
                _plot(preset, records, out / CURVE_FILE)
            report.advance(iteration, _progress(preset, record))
            if interrupted:
                report.log(
                    f"interrupted: saved a checkpoint at iteration {iteration}; "
                    f"continue with: azx train --out {out} --resume"
                )
                raise KeyboardInterrupt
        report.log(
            f"done: {iteration} iterations in {elapsed():.0f}s; results in {out} "
            f"({METRICS_FILE}, {CURVE_FILE}, {CHECKPOINT_DIR}/)"
        )
    return state
