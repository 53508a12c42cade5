"""The training loop behind [`azx.run.train`][] (`azx train`): progress, evaluations,
checkpoints, Ctrl-C.

Private: `azx.run` re-exports `train` and `TrainingInterrupted`.
"""

import contextlib
import dataclasses
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

from . import parallel, presets
from ._cluster import agree, same_everywhere
from ._errors import one_line
from ._evaluators import evaluator
from ._files import write_atomic
from ._preset import RECIPES, Option
from ._report import plot_seeds
from ._rundir import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    CURVE_FILE,
    METRICS_FILE,
    Run,
    RunError,
    build,
    check_fresh_directory,
    check_same_training,
    check_writable,
    open_checkpoints,
    read_metrics,
    restore,
    resumable_config,
    run_config,
    seed_directories,
    write_json,
)
from ._trackers import check_trackers, open_trackers
from .checkpoint import DamagedCheckpointWarning


CHECKPOINT_SECONDS = 300.0
"""Save at least this often (besides every evaluation), so that a crash loses little."""
LOG_SECONDS = 30.0
"""Off a terminal, the longest time between two progress lines (while training calls end
more often than that)."""
_EVAL_STREAM = 1  # key streams of a run's seed: training uses the seed's key itself


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped [`azx.run.train`][] after it saved a checkpoint; `train(out,
    resume=True)` continues the run."""

    def __init__(self, directory: Path, iteration: int):
        super().__init__(f"interrupted at iteration {iteration}; checkpoint saved in {directory}")
        self.directory = directory
        self.iteration = iteration


TRAIN_OPTIONS = (
    Option(
        "iterations",
        int,
        "Training iterations (and the length of a learning-rate schedule that spans the preset's).",
        field="iterations",
        minimum=1,
    ),
    Option(
        "eval_every",
        int,
        "Iterations between evaluations and checkpoints.",
        field="eval_every",
        minimum=1,
    ),
    Option("log_every", int, "Iterations per logged training call.", field="log_every", minimum=1),
)
"""The training options of every preset; each recipe adds its own
(`AbstractRecipe.train_options`)."""


def _select_preset(preset: str | None, env: str | None) -> presets.Preset:
    """The preset named `preset` (`pgx:GAME`: the generic setup), or without one, the
    first that plays `env` (default tic-tac-toe)."""
    if preset is not None:
        try:
            if preset.startswith("pgx:"):
                return presets.for_pgx_game(preset.removeprefix("pgx:"))
            return presets.get(preset)
        except ValueError as error:
            raise RunError(str(error)) from None
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


def train_options(recipe: type[presets.AbstractRecipe]) -> dict[str, Option]:
    """The training options of `recipe`'s presets, by name."""
    return {option.name: option for option in (*TRAIN_OPTIONS, *recipe.train_options)}


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
        from rich import console, progress as bar

        self.total = total
        self.shown = ""
        self.last_line = time.perf_counter()
        self.console = console.Console(stderr=True, quiet=quiet)
        self.interactive = self.console.is_terminal
        self.progress = bar.Progress(
            bar.TextColumn("[bold]train"),
            bar.BarColumn(),
            bar.MofNCompleteColumn(),
            bar.TimeElapsedColumn(),
            bar.TextColumn("eta {task.fields[eta]}"),
            bar.TextColumn("{task.fields[info]}"),
            bar.TextColumn("[cyan]{task.fields[phase]}"),
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
        # Off a terminal there is no bar to show it: the start of a compile or of each
        # evaluation match, the long waits, becomes a line.
        waits = text.startswith(("compiling", "evaluating"))
        if waits and text != self.shown and not self.interactive:
            self.log(f"{text}…")
        self.shown = text

    def advance(self, iteration: int, info: str, eta_seconds: float | None) -> None:
        self.progress.update(self.task, completed=iteration, info=info, eta=_clock(eta_seconds))
        # Off a terminal (a log file), a line at least every `LOG_SECONDS` and at the end.
        now = time.perf_counter()
        if not self.interactive and (
            now - self.last_line >= LOG_SECONDS or iteration >= self.total
        ):
            self.log(f"iteration {iteration}/{self.total} | {info} | eta {_clock(eta_seconds)}")
            self.last_line = now


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
    evaluation_seconds: float = 0.0

    def remaining(self, iteration: int, total: int, eval_every: int) -> float | None:
        if not self.trained:
            return None
        evaluations = total // eval_every - iteration // eval_every
        evaluations += total % eval_every != 0  # the final one
        per_iteration = self.training_seconds / self.trained
        return (total - iteration) * per_iteration + evaluations * self.evaluation_seconds


def train(
    out: str | os.PathLike | None = None,
    *,
    preset: str | None = None,
    env: str | None = None,
    seed: int | None = None,
    seeds: int | None = None,
    resume: bool = False,
    settings: Sequence[str] = (),
    log: Sequence[str] = (),
    quiet: bool = False,
    **options: Any,
) -> Run | list[Run]:
    """Train a preset into the run directory `out`: what `azx train` does, each argument
    as its flag (`settings` is `--set`); docs/cli.md describes it in full.

    Logs `metrics.jsonl` every `log_every` iterations; evaluates and checkpoints every
    `eval_every` (also at least every five minutes, at the end, and the untrained agent as
    iteration 0); draws `learning_curve.png`. A first Ctrl-C saves a checkpoint and raises
    [`azx.run.TrainingInterrupted`][]; `resume=True` continues from the newest readable
    checkpoint as if the run had not stopped.

    `preset`: a name of [`azx.presets.names`][] or `"pgx:<game>"`; `env`: another
    environment of the same kind (without `preset`, the preset that plays it); `options`:
    the training options (`TRAIN_OPTIONS` and the recipe's `train_options`), `None` for
    the preset's (with `resume`, the run's); `settings`: `KEY=VALUE` changes
    ([`azx.presets.Preset.changed`][]); `log`: trackers (`"tensorboard"`, `"wandb"`);
    `seeds` > 1: that many seeds from `seed` as one program, each in `out/seed<S>`. Every
    device JAX sees trains; with several processes each calls `train` with the same
    arguments, and process 0 writes the files.

    **Returns:** the trained [`azx.run.Run`][] (with `seeds` > 1, a list of each seed's).

    **Raises:** [`azx.run.RunError`][], before the first write (leaving the run directory
    as it was), for an unknown preset, env, option or setting, games that do not split
    evenly over the devices, processes given different arguments, an `out` that cannot be
    written or holds a different run (unless `resume`), or `resume` without a readable
    checkpoint, configuration or metrics log.
    """
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise RunError(f"`seeds` must be a positive number of seeds, got {seeds!r}")
    out, chosen, config = _configure(out, preset, env, seed, resume, seeds, settings, options)
    log = (log,) if isinstance(log, str) else tuple(log)
    check_trackers(log)
    directories = seed_directories(out, config)
    vmap_seeds = len(directories) > 1 and chosen.vmaps_seeds()
    trainer, state = build(chosen, list(directories), vmap=vmap_seeds)
    try:
        evaluator(chosen.recipe, trainer.env).check_training()
    except (ValueError, ImportError) as error:  # ImportError: an optional package
        raise RunError(str(error)) from None
    config = dict(config, preset=chosen.to_dict())
    same_everywhere(dict(config, resume=resume))
    mesh = _mesh(trainer)
    state, records, elapsed_before = _prepare(out, config, directories, state, resume, mesh)
    with contextlib.ExitStack() as stack:
        members = [
            _Member.open(stack, directory, seed, kept, chosen.eval_every, log, config)
            for (seed, directory), kept in zip(directories.items(), records)
        ]
        training = _Training(out, chosen, trainer, members, mesh, vmap_seeds=vmap_seeds)
        state = training.run(state, elapsed_before=elapsed_before, quiet=quiet)
    if mesh is not None:
        state = parallel.gather(state)
    runs = [
        Run(member.out, chosen, member.seed, int(part.iteration), trainer.env, trainer, part)
        for member, part in zip(members, _seeds_of(state, len(members)))
    ]
    return runs if len(runs) > 1 else runs[0]


def _seeds_of(tree, count: int) -> list:
    """Each of `count` seeds' part of `tree` (a state or a history, stacked where `count`
    > 1)."""
    return [presets.take_seed(tree, index) for index in range(count)] if count > 1 else [tree]


def _changed(chosen: presets.Preset, env: str | None, settings) -> presets.Preset:
    try:
        return chosen.changed(env=env, settings=settings)
    except (ValueError, TypeError) as error:
        raise RunError(one_line(error)) from None


def _configure(
    out, preset, env, seed, resume, seeds, settings, options: dict[str, Any]
) -> tuple[Path, presets.Preset, dict[str, Any]]:
    """The run directory, the preset (on `env`, with `settings` and the given training
    `options`) and the run's configuration (`config.json`): the saved ones with `resume`,
    otherwise from `preset` or `env`, `seed` and `seeds`."""
    if resume:
        if out is None:
            raise RunError("`resume` needs `out`, the run directory to continue")
        out = Path(out)
        check_writable(out, "out")
        explicit = {"preset": preset, "env": env, "seed": seed, "seeds": seeds}
        config = resumable_config(out, explicit)
        saved = presets.from_dict(config["preset"])
        changed = _changed(saved, env, settings)
        check_same_training(out, config, dict(config, preset=changed.to_dict()), "settings")
        return out, _with_options(changed, options, stretch_schedule=False), config
    chosen = _changed(_select_preset(preset, env), env if preset else None, settings)
    chosen = _with_options(chosen, options, stretch_schedule=True)
    seed = 0 if seed is None else seed
    seeds = 1 if seeds is None else seeds
    directory_name = chosen.name.replace(":", "-")
    name = f"seed{seed}" if seeds == 1 else f"seeds{seed}-{seed + seeds - 1}"
    out = Path(out) if out is not None else Path("runs") / f"{directory_name}-{name}"
    check_writable(out, "out")
    config = run_config(chosen, seed, seeds)
    check_fresh_directory(out, config)
    return out, chosen, config


def _with_options(
    chosen: presets.Preset, options: dict[str, Any], *, stretch_schedule: bool
) -> presets.Preset:
    """`chosen` with the training `options` that were given (not `None`). An option of
    another recipe, or none, is a `RunError`. With `stretch_schedule`, a learning-rate
    schedule over the preset's whole length follows a given `iterations` (a resumed run
    keeps the schedule it was trained with)."""
    own = train_options(type(chosen.recipe))
    given = {name: value for name, value in options.items() if value is not None}
    foreign = [name for name in given if name not in own]
    if foreign:
        others = [r.name for r in RECIPES.values() if foreign[0] in train_options(r)]
        where = f"applies to {others[0]} presets" if others else "is not an option"
        raise RunError(
            f"{', '.join(f'`{n}`' for n in foreign)} {where}; {chosen.name} is a "
            f"{chosen.algorithm} preset"
        )
    changes = {
        own[name].field: tuple(value) if isinstance(value, list | tuple) else value
        for name, value in given.items()
    }
    field = chosen.recipe.schedule
    if stretch_schedule and "iterations" in changes and field is not None:
        if getattr(chosen.config, field) == chosen.iterations:
            changes["config"] = dataclasses.replace(chosen.config, **{field: changes["iterations"]})
    try:
        return chosen.replace(**changes)
    except ValueError as error:
        raise RunError(str(error)) from None


def _restore(out: Path, like, step: int | None = None):
    """The state of checkpoint `step` (default: the newest readable), the metrics records
    up to it and the seconds the run had taken."""
    state, meta = restore(out, like, step)
    records = [r for r in read_metrics(out) if r["iteration"] <= int(state.iteration)]
    return state, records, float(meta.get("elapsed_s", 0.0))


def _write_start(out: Path, config, records, iteration: int, resume: bool) -> None:
    """A run directory ready to train from `iteration`: its `config.json`, the metrics
    records kept, and (with `resume`) no checkpoint newer than `iteration`."""
    main = jax.process_index() == 0
    if main:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / CONFIG_FILE, config)
    if resume:  # checkpoints newer than the one resumed from could not be read: kept aside
        with open_checkpoints(out) as checkpoints:  # (orbax opens it in every process at once)
            for step in [step for step in checkpoints.all_steps() if step > iteration]:
                warnings.warn(
                    f"moved the unreadable checkpoint {step} to {checkpoints.set_aside(step)}; "
                    f"training continues from iteration {iteration}",
                    DamagedCheckpointWarning,
                    stacklevel=2,
                )
    if main:
        write_atomic(out / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in records))


def _prepare(out: Path, config, directories: dict[int, Path], state, resume: bool, mesh):
    """Each seed's run directory ready to train (for several seeds, `out/config.json`
    too), placed on the `mesh` when there is one. With `resume`, every seed is restored
    from the newest iteration that all of them have saved, and everything is read (and
    checked) before any file of the run changes. The state, each seed's metrics records
    and the seconds the run had taken."""
    stacked = len(directories) > 1
    if mesh is not None and not stacked:
        state = parallel.shard_state(state, mesh)
    parts = _seeds_of(state, len(directories))
    restored = [(part, [], 0.0) for part in parts]
    if resume:
        restored = [_restore(d, part) for d, part in zip(directories.values(), parts)]
        iteration = min(int(s.iteration) for s, _, _ in restored)
        restored = [
            r if int(r[0].iteration) == iteration else _restore(d, part, iteration)
            for r, d, part in zip(restored, directories.values(), parts)
        ]
    # With several processes, process 0 alone writes the run's files (checkpoints aside:
    # every process writes its part of them), once every process has checked everything.
    parallel.sync(f"azx: {out} checked")
    if stacked and jax.process_index() == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / CONFIG_FILE, config)
    for (seed, directory), (part, records, _) in zip(directories.items(), restored):
        own = {k: v for k, v in config.items() if k != "seeds"} | {"seed": seed}
        _write_start(directory, own if stacked else config, records, int(part.iteration), resume)
    parallel.sync(f"azx: {out} prepared")
    states, records, elapsed = zip(*restored)
    state = presets.stack_seeds(states) if stacked else states[0]
    if mesh is not None and stacked:
        state = parallel.shard_state(state, mesh, seeds=True)
    return state, list(records), elapsed[0]


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


@dataclasses.dataclass
class _Member:
    """One seed's run directory in a training: its metrics records, checkpoints and
    trackers."""

    out: Path
    seed: int
    records: list[dict[str, Any]]
    checkpoints: Any
    trackers: list

    @classmethod
    def open(cls, stack, out: Path, seed: int, records, eval_every: int, log, config):
        """The member for `out`, its checkpoints and trackers open in `stack`. The
        evaluated checkpoints stay (for `azx eval --opponent run:DIR@N`), besides the
        newest three; with several processes, process 0 alone logs."""
        checkpoints = stack.enter_context(open_checkpoints(out, keep_period=eval_every))
        log = log if jax.process_index() == 0 else ()
        trackers = stack.enter_context(open_trackers(log, out, dict(config, seed=seed)))
        return cls(out, seed, records, checkpoints, trackers)


class _Training:
    """The loop of one [`train`][azx.run.train] call: training calls of `log_every`
    iterations (shorter where an evaluation falls sooner), each logged; evaluations,
    checkpoints and the learning curve when due; Ctrl-C. What differs between
    algorithms, the preset's recipe and its evaluator say. With several
    members (seeds), the state is their states stacked, trained in one program (all at
    once under `vmap` with `vmap_seeds`, else one after another), and each member's
    directory gets what its own run would write."""

    def __init__(
        self, out: Path, preset, trainer, members: list[_Member], mesh, *, vmap_seeds: bool
    ):
        self.out, self.preset, self.recipe, self.trainer = out, preset, preset.recipe, trainer
        self.judge = evaluator(preset.recipe, trainer.env)
        self.members, self.mesh = members, mesh
        self.stacked = len(members) > 1
        if mesh is not None:
            train = parallel.sharded_train(trainer, mesh, seeds=self.stacked, vmap_seeds=vmap_seeds)
        elif self.stacked:
            train = parallel.over_seeds(trainer.train_and_record, vmap=vmap_seeds)
        else:
            train = trainer.train_and_record
        self.train_fn = eqx.filter_jit(train)
        self.main = jax.process_index() == 0
        self.clock = _Clock()

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started

    def iteration(self, state) -> int:
        """The iterations `state` has trained (every seed's: they train together)."""
        return int(state.iteration[0] if self.stacked else state.iteration)

    def each(self, tree) -> list:
        return _seeds_of(tree, len(self.members))

    def append(self, member: _Member, record: dict[str, Any]) -> None:
        member.records.append(record)
        if self.main:
            with open(member.out / METRICS_FILE, "a") as file:
                file.write(json.dumps(record) + "\n")
        for tracker in member.trackers:
            tracker.log(record)

    def evaluate(self, member: _Member, state, record: dict[str, Any], report: _Reporter):
        tick = time.perf_counter()
        iteration = record["iteration"]
        key = jax.random.fold_in(jax.random.key(member.seed), _EVAL_STREAM)
        key = jax.random.fold_in(key, iteration)
        record["eval"] = self.judge.evaluate(self.trainer, state, key=key, phase=report.phase)
        when = f"iteration {iteration}" + (" (untrained)" if iteration == 0 else "")
        if self.stacked:
            when = f"seed {member.seed}, {when}"
        for line in self.judge.evaluation_lines(record["eval"]):
            report.log(f"{when}: {line}")
        return time.perf_counter() - tick

    def evaluate_all(self, state, records: list[dict[str, Any]], report: _Reporter) -> None:
        # On one device, from the whole state. With several processes each plays the same
        # games (the same state and key), so that none waits for another.
        whole = state if self.mesh is None else parallel.gather(state)
        seconds = [
            self.evaluate(member, part, record, report)
            for member, part, record in zip(self.members, self.each(whole), records)
        ]
        self.clock.evaluation_seconds = sum(seconds)

    def plot(self, report: _Reporter) -> None:
        if not self.main:
            return
        title = self.preset.description or self.preset.name
        for member in self.members:
            report.phase(f"drawing {CURVE_FILE}")
            self.judge.plot(member.records, member.out / CURVE_FILE, title=title)
            iteration = member.records[-1]["iteration"]
            for tracker in member.trackers:
                tracker.log_image("learning_curve", member.out / CURVE_FILE, iteration=iteration)
        if self.stacked:
            runs = {member.seed: member.records for member in self.members}
            plot_seeds(runs, self.judge.headline, self.out / CURVE_FILE, title=title)

    def run(self, state, *, elapsed_before: float, quiet: bool):
        """Train `state` to the preset's iterations; the trained state."""
        preset, out = self.preset, self.out
        self.elapsed_before = elapsed_before
        self.started = self.last_save = time.perf_counter()
        first = self.iteration(state)
        reporter = _Reporter(preset.iterations, first, quiet or not self.main)
        seeds = [member.seed for member in self.members]
        with reporter as report, _interruptible() as stopped:
            if first >= preset.iterations:
                report.log(f"{out}: already trained {first} of {preset.iterations} iterations")
                return state
            which = f"seed {seeds[0]}"
            if self.stacked:
                which = f"{len(seeds)} seeds ({seeds[0]}-{seeds[-1]}) trained together"
            report.log(
                f"{preset.description or preset.name}: {preset.iterations} iterations, "
                f"{which}, writing to {out}"
                + (f" (resuming at iteration {first})" if first else "")
            )
            report.phase("compiling the training step")
            # Calls end at every evaluation, so none is longer than `eval_every`.
            chunk = min(preset.log_every, preset.eval_every, preset.iterations)
            compile_start = time.perf_counter()
            step_chunk = self.train_fn.lower(state, chunk).compile()
            report.log(f"compiled the training step in {time.perf_counter() - compile_start:.1f}s")
            if first == 0:
                # The untrained agent, so that the curve starts where learning starts. Its
                # games draw from the evaluation key stream: training is unchanged by them.
                records = [{"iteration": 0, "env_steps": 0} for _ in self.members]
                self.evaluate_all(state, records, report)
                for member, record in zip(self.members, records):
                    record["elapsed_s"] = self.elapsed()
                    self.append(member, record)
                self.plot(report)
            while first < preset.iterations:
                state = self.train_call(state, step_chunk, chunk, report, stopped)
                first = self.iteration(state)
            where = f"{out}/seed*/" if self.stacked else f"{out}/"
            report.log(
                f"done: {first} iterations in {self.elapsed():.0f}s; results in "
                f"{where} ({METRICS_FILE}, {CURVE_FILE}, {CHECKPOINT_DIR}/)"
                + (f", every seed's curve in {out / CURVE_FILE}" if self.stacked else "")
            )
        return state

    def train_call(self, state, step_chunk, chunk: int, report: _Reporter, stopped):
        """One training call (`chunk` iterations, or fewer where an evaluation or the end
        comes sooner), logged, and the evaluation, checkpoint and curve that are due after
        it."""
        preset, trainer = self.preset, self.trainer
        previous = self.iteration(state)
        next_evaluation = (previous // preset.eval_every + 1) * preset.eval_every
        n = min(chunk, preset.iterations - previous, next_evaluation - previous)
        report.phase("training")
        tick = time.perf_counter()
        state, history = step_chunk(state, n) if n == chunk else self.train_fn(state, n)
        state = jax.block_until_ready(state)
        seconds = time.perf_counter() - tick
        if n == chunk:  # a shorter last call compiles first: not the training rate
            self.clock.training_seconds += seconds
            self.clock.trained += n
        iteration = previous + n
        # Each seed's steps per second (all of them train in the same `seconds`).
        rate = n * trainer.env_steps_per_iteration / seconds
        records = [
            {"iteration": iteration, "env_steps": iteration * trainer.env_steps_per_iteration}
            | self.recipe.record(trainer, part, part_history, rate)
            | {"elapsed_s": self.elapsed()}
            for part, part_history in zip(self.each(state), self.each(history))
        ]
        finished = iteration >= preset.iterations
        due = finished or previous // preset.eval_every != iteration // preset.eval_every
        if due:
            self.evaluate_all(state, records, report)
        for member, record in zip(self.members, records):
            self.append(member, record)
        interrupted, save_due = agree(
            stopped(), time.perf_counter() - self.last_save > CHECKPOINT_SECONDS
        )
        if due or interrupted or save_due:
            report.phase("saving a checkpoint")
            meta = {"iteration": iteration, "elapsed_s": self.elapsed()}
            for member, part in zip(self.members, self.each(state)):
                member.checkpoints.save(part, step=iteration, meta=meta)
            self.last_save = time.perf_counter()
        if due or interrupted:
            self.plot(report)
        remaining = self.clock.remaining(iteration, preset.iterations, preset.eval_every)
        report.advance(iteration, self.recipe.progress(records[0]), remaining)
        if interrupted:
            report.log(f"interrupted: saved a checkpoint at iteration {iteration}")
            raise TrainingInterrupted(self.out, iteration)
        return state
