"""The training loop behind [`azx.run.train`][] (`azx train`): progress, evaluations,
checkpoints, Ctrl-C.

Private: `azx.run` re-exports `train` and `TrainingInterrupted`.
"""

import dataclasses
import hashlib
import json
import math
import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np

from . import arena, parallel, presets
from ._report import (
    describe,
    describe_return,
    evaluate,
    evaluate_policy,
    plot_learning_curve,
    plot_return_curve,
)
from ._rundir import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    CURVE_FILE,
    METRICS_FILE,
    Run,
    RunError,
    _build,
    _check_fresh_directory,
    _check_writable,
    _checkpointer,
    _restore,
    _resumable_config,
    _run_config,
    _write_atomic,
    read_metrics,
    write_json,
)
from .checkpoint import DamagedCheckpointWarning, _sync


CHECKPOINT_SECONDS = 300.0
"""Save at least this often (besides every evaluation), so that a crash loses little."""
_EVAL_STREAM = 1  # key streams of a run's seed: training uses the seed's key itself


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped [`azx.run.train`][] after it saved a checkpoint; `train(out,
    resume=True)` continues the run."""

    def __init__(self, directory: Path, iteration: int):
        super().__init__(f"interrupted at iteration {iteration}; checkpoint saved in {directory}")
        self.directory = directory
        self.iteration = iteration


def _select_preset(preset: str | None, env: str | None) -> presets.AnyPreset:
    if preset is not None:
        try:
            chosen = (
                presets.for_pgx_game(preset.removeprefix("pgx:"))
                if preset.startswith("pgx:")
                else presets.get(preset)
            )
        except ValueError as error:
            raise RunError(str(error)) from None
        if env is not None and env != chosen.env:
            raise RunError(
                f"`env` {env!r} does not match preset {preset!r}, which plays {chosen.env!r}"
            )
        return chosen
    env = env or "tic_tac_toe"
    matching = [name for name in presets.names() if presets.get(name).env == env]
    if matching:
        return presets.get(matching[0])
    try:
        return presets.for_pgx_game(env.removeprefix("pgx:"))
    except ValueError:
        games = ", ".join(sorted({presets.get(name).env for name in presets.names()}))
        raise RunError(
            f"unknown env {env!r}: games with a preset are {games}, and any two-player pgx "
            "game trains with a generic setup"
        ) from None


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


class _Reporter:
    """Progress output on stderr: a progress bar with the current phase (compiling,
    training, evaluating, saving) on a terminal; plain lines otherwise."""

    def __init__(self, total: int, start: int, quiet: bool = False):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.total = total
        self.kind = ""
        self.console = Console(stderr=True, quiet=quiet)
        self.interactive = self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta {task.fields[eta]}"),
            TextColumn("{task.fields[info]}"),
            TextColumn("[cyan]{task.fields[phase]}"),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task(
            "train", total=total, completed=start, info="", eta="-:--:--", phase=""
        )

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.phase("")
        self.progress.stop()

    def log(self, message: str) -> None:
        self.progress.console.print(message, highlight=False, soft_wrap=True)

    def phase(self, text: str) -> None:
        """Show what the loop is doing now (one short phrase; `""` clears it)."""
        self.progress.update(self.task, phase=f"{text}…" if text else "")
        # Off a terminal there is no bar to show it: the start of a compile or an
        # evaluation, the long waits, becomes a line.
        kind = text.split(" ")[0]
        if kind in ("compiling", "evaluating") and kind != self.kind and not self.interactive:
            self.log(f"{text}…")
        self.kind = kind

    def advance(self, iteration: int, info: str, eta_seconds: float | None) -> None:
        self.progress.update(self.task, completed=iteration, info=info, eta=_clock(eta_seconds))


def _clock(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-:--:--"
    minutes, second = divmod(int(round(seconds)), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}"


@dataclasses.dataclass
class _Clock:
    """The time left, from the training rate and the last evaluation's length, so that a
    compile or an evaluation does not make it jump."""

    training_seconds: float = 0.0
    trained: int = 0
    evaluation_seconds: float | None = None

    def remaining(self, iteration: int, total: int, eval_every: int) -> float | None:
        if not self.trained:
            return None
        evaluations = total // eval_every - iteration // eval_every
        evaluations += total % eval_every != 0  # the final one
        per_evaluation = self.evaluation_seconds or 0.0
        per_iteration = self.training_seconds / self.trained
        return (total - iteration) * per_iteration + evaluations * per_evaluation


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
    `learning_curve.png`. The newest three checkpoints are kept, and every checkpoint at a
    multiple of `eval_every` (opponents for `azx eval --opponent run:DIR@ITERATION`). A
    first Ctrl-C stops after the running training call, saves a checkpoint and raises
    [`azx.run.TrainingInterrupted`][] (a `KeyboardInterrupt`); `resume=True` continues
    from the newest checkpoint exactly as if the run had not stopped. The untrained agent
    is evaluated too, as the record of iteration 0.

    `preset` is a preset name (see [`azx.presets.names`][]) or `"pgx:<game>"` for a
    two-player pgx game with [`azx.presets.for_pgx_game`][]'s generic setup; `env`
    instead picks the preset that plays that environment (or the generic setup).

    Options left as `None` take the preset's values (or, with `resume`, the run's).
    `eval_games` and `opponents` apply to AlphaZero presets, `eval_episodes` to PPO ones.

    **Returns:** the trained [`azx.run.Run`][].

    Trains on every device JAX sees: with more than one, the games are split over a mesh
    of all of them ([`azx.parallel.sharded_train`][]). With several processes (after
    `jax.distributed.initialize()`), every process calls `train` with the same arguments
    and an `out` on a file system they share: process 0 writes the run's files and the
    progress, every process its part of each checkpoint, and each plays the same
    evaluation games; the returned run holds the whole state in every process.

    With `resume`, a damaged newest checkpoint is skipped for the newest one that reads
    back intact, and moved aside into `checkpoints/unreadable/` (never deleted), each
    with an [`azx.checkpoint.DamagedCheckpointWarning`][].

    **Raises:** [`azx.run.RunError`][] for an unknown preset or env, an option the
    preset's algorithm does not have, games that do not split evenly over the devices,
    processes given different arguments, an `out` that cannot be written, a directory
    holding a different run (unless `resume`), or `resume` without a readable
    checkpoint, configuration or metrics log. Every check comes before the first write:
    a `RunError` leaves the run directory as it was.
    """
    explicit = {"preset": preset, "env": env, "seed": seed}
    if resume:
        if out is None:
            raise RunError("`resume` needs `out`, the run directory to continue")
        out = Path(out)
        _check_writable(out, "out")
        config = _resumable_config(out, explicit)
        chosen = presets.from_dict(config["preset"])
    else:
        chosen = _select_preset(preset, env)
        seed = 0 if seed is None else seed
        directory_name = chosen.name.replace(":", "-")
        out = Path(out) if out is not None else Path("runs") / f"{directory_name}-seed{seed}"
        _check_writable(out, "out")
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
            names = ", ".join(f"`{_ARGUMENTS.get(name, name)}`" for name in given)
            raise RunError(
                f"{names} applies to {algorithm} presets; {chosen.name} is a "
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
            except (ValueError, ImportError) as error:  # ImportError: an optional package
                raise RunError(str(error)) from None
        if chosen.eval_games % 2:
            raise RunError(
                "`eval_games` must be even (half the games with each colour), got "
                f"{chosen.eval_games}"
            )
    config = dict(config, preset=chosen.to_dict())
    _check_same_everywhere(dict(config, resume=resume))
    mesh = _mesh(trainer)
    if mesh is not None:
        state = parallel.shard_state(state, mesh)
    records: list[dict[str, Any]] = []
    elapsed_before = 0.0
    if resume:
        # Everything is read (and checked) before any file of the run changes.
        state, meta = _restore(out, state)
        elapsed_before = float(meta.get("elapsed_s", 0.0))
        records = [r for r in read_metrics(out) if r["iteration"] <= int(state.iteration)]

    # With several processes, process 0 alone writes the run's files (checkpoints aside:
    # every process writes its part of them), once every process has checked everything.
    _sync(f"azx: {out} checked")
    main = jax.process_index() == 0
    if main:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / CONFIG_FILE, config)
    if resume:
        with _checkpointer(out) as checkpoints:  # (orbax opens it in every process at once)
            _set_aside_newer(checkpoints, int(state.iteration))
    if main:
        _write_atomic(out / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in records))
    _sync(f"azx: {out} prepared")
    # The evaluated checkpoints stay (for `azx eval --opponent run:DIR@N`), besides the
    # newest three.
    with _checkpointer(out, keep_period=chosen.eval_every) as checkpoints:
        state = _train_loop(
            out, chosen, trainer, state, checkpoints, records, elapsed_before, seed, quiet, mesh
        )
    if mesh is not None:
        state = parallel.gather(state)
    return Run(
        directory=out,
        preset=chosen,
        seed=seed,
        iteration=int(state.iteration),
        env=trainer.env,
        trainer=trainer,
        state=state,
    )


def _mesh(trainer):
    """The mesh of every device (every process's) to train on, or `None` with one device."""
    if jax.device_count() == 1:
        return None
    mesh = parallel.make_mesh()
    try:
        trainer.check_shards(mesh.shape[parallel.AXIS])
    except ValueError as error:
        where = f" of {jax.process_count()} processes" if jax.process_count() > 1 else ""
        raise RunError(f"training on the {jax.device_count()} devices{where}: {error}") from None
    return mesh


def _check_same_everywhere(settings: dict[str, Any]) -> None:
    """With several processes: refuse to train unless every process was given the same
    settings (each builds the same initial state from them)."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).digest()
    mine = np.frombuffer(digest[:16], np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, mine.size)
    differing = [i for i, other in enumerate(every) if not np.array_equal(other, every[0])]
    if differing:
        listed = ", ".join(map(str, differing))
        raise RunError(
            f"process {listed} was started with other settings than process 0: every process "
            "needs the same preset, seed, options and `resume`"
        )


def _agree(interrupted: bool, save_due: bool) -> tuple[bool, bool]:
    """With several processes, one decision for all: stop if any process was interrupted,
    save on time when process 0's clock says so."""
    if jax.process_count() == 1:
        return interrupted, save_due
    from jax.experimental import multihost_utils

    flags = np.asarray(multihost_utils.process_allgather(np.array([interrupted, save_due])))
    flags = flags.reshape(-1, 2)
    return bool(flags[:, 0].any()), bool(flags[0, 1])


def _set_aside_newer(checkpoints, iteration: int) -> None:
    """Checkpoints newer than the one resumed from could not be read: move them out of
    the way of the new ones (kept, not deleted)."""
    for step in checkpoints.all_steps():
        if step > iteration:
            moved = checkpoints.set_aside(step)
            warnings.warn(
                f"moved the unreadable checkpoint {step} to {moved}; training continues from "
                f"iteration {iteration}",
                DamagedCheckpointWarning,
                stacklevel=3,
            )


# Preset fields whose `train` argument has another name.
_ARGUMENTS = {"eval_opponents": "opponents"}


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

    def per_episode(values) -> float | None:
        """The mean over the episodes that ended during the call; None if none did."""
        return float(np.sum(episodes * np.asarray(values))) / finished if finished else None

    names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    names += ("explained_variance",)
    record |= {name: _mean(getattr(history, name)) for name in names}
    return record | {
        "learning_rate": float(metrics.learning_rate),
        "episodes": finished,
        "episode_return": per_episode(history.episode_return),
        "episode_length": per_episode(history.episode_length),
        "steps_per_s": rate,
    }


def _evaluate_now(preset, trainer, state, key, report) -> dict[str, Any]:
    if preset.algorithm == "ppo":
        report.phase(f"evaluating the policy ({preset.eval_episodes} episodes)")
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
        trainer.env,
        agents,
        preset.eval_opponents,
        num_games=preset.eval_games,
        key=key,
        on_match=lambda agent, spec: report.phase(f"evaluating {agent} vs {spec}"),
    )


def _evaluation_lines(preset, iteration: int, results: dict[str, Any]) -> list[str]:
    when = f"iteration {iteration}" + (" (untrained)" if iteration == 0 else "")
    if preset.algorithm == "ppo":
        return [f"{when}: {describe_return(results)}"]
    return [
        f"{when}: {agent} vs {spec}: {describe(result)}"
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
    plot = plot_return_curve if preset.algorithm == "ppo" else plot_learning_curve
    plot(records, path, title=preset.description or preset.name)


def _train_loop(
    out, preset, trainer, state, checkpoints, records, elapsed_before, seed, quiet, mesh
):
    chunk = min(preset.log_every, preset.iterations)
    first = int(state.iteration)
    eval_key = jax.random.fold_in(jax.random.key(seed), _EVAL_STREAM)
    train_fn = eqx.filter_jit(
        trainer.train_and_record if mesh is None else parallel.sharded_train(trainer, mesh)
    )
    main = jax.process_index() == 0
    started = time.perf_counter()
    last_save = started
    clock = _Clock()

    def elapsed():
        return elapsed_before + time.perf_counter() - started

    def append(record):
        records.append(record)
        if main:
            with open(out / METRICS_FILE, "a") as file:
                file.write(json.dumps(record) + "\n")

    def evaluation(state, record, report):
        tick = time.perf_counter()
        iteration = record["iteration"]
        key = jax.random.fold_in(eval_key, iteration)
        # On one device, from the whole state. With several processes each plays the same
        # games (the same state and key), so that none waits for another.
        whole = state if mesh is None else parallel.gather(state)
        record["eval"] = _evaluate_now(preset, trainer, whole, key, report)
        for line in _evaluation_lines(preset, iteration, record["eval"]):
            report.log(line)
        clock.evaluation_seconds = time.perf_counter() - tick

    def plot(report):
        if main:
            report.phase(f"drawing {CURVE_FILE}")
            _plot(preset, records, out / CURVE_FILE)

    reporter = _Reporter(preset.iterations, first, quiet or not main)
    with reporter as report, _interruptible() as stopped:
        if first >= preset.iterations:
            report.log(f"{out}: already trained {first} of {preset.iterations} iterations")
            return state
        report.log(
            f"{preset.description or preset.name}: {preset.iterations} iterations, seed {seed}, "
            f"writing to {out}" + (f" (resuming at iteration {first})" if first else "")
        )
        report.phase("compiling the training step")
        compile_start = time.perf_counter()
        step_chunk = train_fn.lower(state, chunk).compile()
        report.log(f"compiled the training step in {time.perf_counter() - compile_start:.1f}s")
        if first == 0:
            # The untrained agent, so that the curve starts where learning starts. Its
            # games draw from the evaluation key stream: training is unchanged by them.
            record = {"iteration": 0, "env_steps": 0}
            evaluation(state, record, report)
            record["elapsed_s"] = elapsed()
            append(record)
            plot(report)
        iteration = first
        while iteration < preset.iterations:
            n = min(chunk, preset.iterations - iteration)
            report.phase("training")
            tick = time.perf_counter()
            state, history = step_chunk(state, n) if n == chunk else train_fn(state, n)
            state = jax.block_until_ready(state)
            seconds = time.perf_counter() - tick
            if n == chunk:  # a shorter last call compiles first: not the training rate
                clock.training_seconds += seconds
                clock.trained += n
            previous, iteration = iteration, int(state.iteration)
            record = _record(preset, trainer, state, history, n, seconds)
            record["elapsed_s"] = elapsed()
            finished = iteration >= preset.iterations
            due = finished or previous // preset.eval_every != iteration // preset.eval_every
            if due:
                evaluation(state, record, report)
            append(record)
            interrupted, save_due = _agree(
                stopped(), time.perf_counter() - last_save > CHECKPOINT_SECONDS
            )
            if due or interrupted or save_due:
                report.phase("saving a checkpoint")
                checkpoints.save(
                    state, step=iteration, meta={"iteration": iteration, "elapsed_s": elapsed()}
                )
                last_save = time.perf_counter()
            if due or interrupted:
                plot(report)
            remaining = clock.remaining(iteration, preset.iterations, preset.eval_every)
            report.advance(iteration, _progress(preset, record), remaining)
            if interrupted:
                report.log(f"interrupted: saved a checkpoint at iteration {iteration}")
                raise TrainingInterrupted(out, iteration)
        report.log(
            f"done: {iteration} iterations in {elapsed():.0f}s; results in {out} "
            f"({METRICS_FILE}, {CURVE_FILE}, {CHECKPOINT_DIR}/)"
        )
    return state
