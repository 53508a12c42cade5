"""The `azx` command: `azx train`, `azx eval`, `azx play`, for AlphaZero, MuZero and PPO
runs.

Bad input (an unknown preset, a run directory that does not fit, an opponent that does
not parse, a flag value out of range) prints one line naming the problem and exits with
status 2. The library's errors name its arguments in backquotes (`` `resume` ``); this
module turns them into flags (`--resume`).
"""

import importlib
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from . import __version__, _cluster, presets, run as runs
from ._evaluators import evaluator
from ._recipes import RECIPES
from ._report import across_seeds
from ._rundir import check_writable, read_preset
from .checkpoint import DamagedCheckpointWarning


# The click that typer builds on: the `click` package, or from typer 0.29 on, typer's own
# copy of it (whose exceptions `import click` would not catch).
_click = importlib.import_module(typer.core.TyperGroup.__mro__[1].__module__.rpartition(".")[0])


class _Group(typer.core.TyperGroup):
    """Usage errors (a bad flag or value) and file system errors as one line, like every
    other azx error; azx's warnings as one line each."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", DamagedCheckpointWarning)
                warnings.showwarning = _show_warning
                code = super().main(*args, standalone_mode=False, **kwargs)
        except _click.exceptions.NoArgsIsHelpError as error:
            error.show()  # `azx` alone: the overview, as before
            code = error.exit_code
        except _click.exceptions.UsageError as error:
            typer.echo(f"azx: error: {error.format_message()}", err=True)
            code = error.exit_code
        except _click.exceptions.ClickException as error:
            error.show()
            code = error.exit_code
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            code = 1
        except BrokenPipeError:
            # The reader of the output went away (`azx eval ... | head -1`): stop quietly.
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (so the exit flush is silent)
            code = 1
        except OSError as error:  # a full disk, a file that vanished, a permission
            typer.echo(f"azx: error: {error}", err=True)
            code = 2
        if standalone_mode:
            sys.exit(code or 0)
        return code


app = typer.Typer(
    cls=_Group,
    help="AlphaZero, MuZero and PPO in JAX: train an agent, evaluate it, play it.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help: typer's rich help shows flags as `--resume <bool>`.
    rich_markup_mode=None,
)


_original_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, DamagedCheckpointWarning):
        typer.echo(f"azx: warning: {message}", err=True)
    else:
        _original_showwarning(message, category, filename, lineno, file, line)


def _show_version(value: bool | None) -> None:
    if value:
        typer.echo(f"azx {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool | None,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = None,
) -> None:
    """AlphaZero, MuZero and PPO in JAX: train an agent, evaluate it, play it."""


# `azx.run.train`'s arguments whose flag is not `--` + the name with dashes.
_RENAMED = {"opponents": "opponent"}
_ARGUMENTS = {
    "out", "preset", "env", "seed", "resume", "iterations", "eval_every", "eval_games",
    "eval_episodes", "opponents", "log_every", "json", "coordinator", "num_processes",
    "process_id", "join_timeout", "log",
}  # fmt: skip


def _as_flags(message: str) -> str:
    """A library message with its `argument` names written as flags (`--argument`)."""

    def flag(match: re.Match) -> str:
        name = match.group(1)
        if name not in _ARGUMENTS:
            return match.group(0)
        return "--" + _RENAMED.get(name, name).replace("_", "-")

    return re.sub(r"`(\w+)`", flag, message)


def _abandon(message: str) -> None:
    """Print `message` as the error and end the process at once (from any thread)."""
    typer.echo(f"azx: error: {_as_flags(message)}", err=True)
    sys.stderr.flush()
    os._exit(2)


def _process_index() -> int:
    import jax

    return jax.process_index()


def _fail(message: str) -> None:
    one_line = " ".join(line.strip() for line in message.splitlines())
    typer.echo(f"azx: error: {_as_flags(one_line)}", err=True)
    raise typer.Exit(2)


def _load(directory: Path, step: int | None) -> runs.Run:
    try:
        return runs.load_run(directory, step=step)
    except runs.RunError as error:
        _fail(str(error))


_PRESETS = ", ".join(presets.names())


_TrainPresetOption = Annotated[
    str | None,
    typer.Option(
        help=f"What to train: a preset ({_PRESETS}), or pgx:GAME for any two-player pgx "
        "game with a generic AlphaZero setup (e.g. pgx:hex).",
        show_default="tic_tac_toe",
        metavar="NAME",
    ),
]
_TrainEnvOption = Annotated[
    str | None,
    # Kept for command lines written before --preset took games: an environment name
    # picks the preset that plays it.
    typer.Option(hidden=True),
]
_TrainOutOption = Annotated[
    Path | None,
    typer.Option(help="Run directory.", show_default="runs/PRESET-seedSEED", metavar="DIR"),
]
_TrainSeedOption = Annotated[
    int | None, typer.Option(help="Random seed.", show_default="0", metavar="N")
]
_TrainSeedsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help=(
            "Train N independent agents, seeds SEED to SEED+N-1, as one program; each "
            "seed's run goes to OUT/seed<S>, their curves together to OUT."
        ),
        show_default="1",
    ),
]
_TrainResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the run in --out from its newest checkpoint, with its saved setup.",
    ),
]
_TrainIterationsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Training iterations (and the length of a learning-rate schedule that spans "
        "the preset's).",
        show_default="the preset's",
    ),
]
_TrainEvalEveryOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Iterations between evaluations and checkpoints.",
        show_default="the preset's",
    ),
]
_TrainEvalGamesOption = Annotated[
    int | None,
    typer.Option(
        min=2,
        metavar="N",
        help="Games per evaluation match, or episodes of a single-player game (even; "
        "AlphaZero, MuZero).",
        show_default="the preset's",
    ),
]
_TrainEvalEpisodesOption = Annotated[
    int | None,
    typer.Option(
        min=1, metavar="N", help="Episodes per evaluation (PPO).", show_default="the preset's"
    ),
]
_TrainOpponentOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Evaluation opponent, repeatable (AlphaZero, MuZero): random, greedy, mcts:N, solver, "
        "openspiel-mcts:N, openspiel-alphabeta:DEPTH, pubeval, gnubg[:LEVEL] or "
        "expectimax[:DEPTH] (see azx eval --help).",
        show_default="the preset's",
        metavar="SPEC",
    ),
]
_TrainLogEveryOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Iterations per logged training call.",
        show_default="the preset's",
    ),
]
_TrainLogOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Experiment tracker, repeatable: tensorboard (event files in RUN/tensorboard/) "
        "or wandb (a Weights & Biases run; WANDB_MODE=offline keeps it in RUN/wandb/). "
        "Each is an extra: pip install 'azx[tensorboard]' or 'azx[wandb]'.",
        show_default="none",
        metavar="TRACKER",
    ),
]
_TrainQuietOption = Annotated[bool, typer.Option("--quiet", help="No progress output.")]
_TrainCoordinatorOption = Annotated[
    str | None,
    typer.Option(
        help="Several processes: process 0's address and a free port (HOST:PORT), the "
        "same in every process. Inside a SLURM or Open MPI job of several tasks the "
        "three settings come from the job.",
        metavar="HOST:PORT",
    ),
]
_TrainNumProcessesOption = Annotated[
    int | None,
    typer.Option(
        help="Several processes: how many take part.",
        metavar="N",
    ),
]
_TrainProcessIdOption = Annotated[
    int | None,
    typer.Option(
        help="Several processes: this process's number, 0 to N-1 (0 writes the files).",
        metavar="I",
    ),
]
_TrainJoinTimeoutOption = Annotated[
    float,
    typer.Option(
        help="Several processes: seconds to wait for all of them to join.",
        metavar="SECONDS",
    ),
]


@app.command()
def train(
    preset: _TrainPresetOption = None,
    env: _TrainEnvOption = None,
    out: _TrainOutOption = None,
    seed: _TrainSeedOption = None,
    seeds: _TrainSeedsOption = None,
    resume: _TrainResumeOption = False,
    iterations: _TrainIterationsOption = None,
    eval_every: _TrainEvalEveryOption = None,
    eval_games: _TrainEvalGamesOption = None,
    eval_episodes: _TrainEvalEpisodesOption = None,
    opponent: _TrainOpponentOption = None,
    log_every: _TrainLogEveryOption = None,
    log: _TrainLogOption = None,
    quiet: _TrainQuietOption = False,
    coordinator: _TrainCoordinatorOption = None,
    num_processes: _TrainNumProcessesOption = None,
    process_id: _TrainProcessIdOption = None,
    join_timeout: _TrainJoinTimeoutOption = _cluster.JOIN_SECONDS,
) -> None:
    """Train an agent (AlphaZero, MuZero or PPO, by preset); writes config.json, metrics.jsonl,
    checkpoints and learning_curve.png into the run directory. Ctrl-C stops after saving a
    checkpoint. Trains on every device JAX sees, of every process when several take part
    (see --coordinator)."""
    if resume and out is None:
        _fail("--resume needs --out, the run directory to continue")
    try:
        joined = _cluster.join(
            coordinator, num_processes, process_id, timeout=join_timeout, on_timeout=_abandon
        )
    except runs.RunError as error:
        _fail(str(error))
    others = joined and _process_index() != 0
    if others:  # process 0 reports for all
        quiet = True
        warnings.simplefilter("ignore", DamagedCheckpointWarning)
    try:
        runs.train(
            out,
            preset=preset,
            env=env,
            seed=seed,
            seeds=seeds,
            resume=resume,
            iterations=iterations,
            eval_every=eval_every,
            eval_games=eval_games,
            eval_episodes=eval_episodes,
            opponents=opponent or None,
            log_every=log_every,
            log=log or (),
            quiet=quiet,
        )
    except runs.RunError as error:
        _fail(str(error))
    except runs.TrainingInterrupted as stop:
        if not others:
            typer.echo(f"continue with: azx train --out {stop.directory} --resume", err=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


_EvalRunOption = Annotated[
    Path, typer.Option(help="Run directory written by azx train.", metavar="DIR")
]
_EvalOpponentOption = Annotated[
    list[str] | None,
    typer.Option(
        help=(
            "AlphaZero, MuZero: random, greedy, mcts:N (rollout MCTS), solver, OpenSpiel's "
            "openspiel-mcts:N and openspiel-alphabeta:DEPTH; for backgammon pubeval and "
            "gnubg[:LEVEL] (GNU Backgammon at 0 ply, LEVEL beginner to expert, the default; "
            "pip install 'azx[gnubg]'); for 2048 expectimax[:DEPTH]; or run:DIR[@ITERATION] (a "
            "checkpoint of this or another run of the same game, playing as --agent with "
            "its own simulations; needs --opening-plies); repeatable."
        ),
        show_default="random",
        metavar="SPEC",
    ),
]
_EvalGamesOption = Annotated[
    int | None,
    typer.Option(
        min=2, metavar="N", help="AlphaZero, MuZero: games per opponent (even).", show_default="200"
    ),
]
_EvalAgentOption = Annotated[
    str | None,
    typer.Option(
        help="AlphaZero, MuZero: search (network + search) or network (policy argmax); "
        "AlphaZero's backgammon also full-move (the value network rates the roll's whole "
        "moves, averaged over the opponent's rolls: fast, no search).",
        show_default="search",
        metavar="KIND",
    ),
]
_EvalSimulationsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="AlphaZero, MuZero: search simulations.",
        show_default="the run's evaluation search's",
    ),
]
_EvalEpisodesOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="PPO: episodes to play.",
        show_default="the preset's",
    ),
]
_EvalGreedyOption = Annotated[
    bool | None,
    typer.Option(
        "--greedy/--sample",
        help="PPO: play the policy's most likely action, or sample it.",
        show_default="the preset's",
    ),
]
_EvalOpeningPliesOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="N",
        help=(
            "AlphaZero, MuZero: the first N plies of every game are random legal moves, for "
            "varied games between agents that play deterministically."
        ),
        show_default="0",
    ),
]
_EvalStepOption = Annotated[
    int | None,
    typer.Option(help="Checkpoint (iteration) to load.", show_default="the newest", metavar="N"),
]
_EvalSeedOption = Annotated[int, typer.Option(help="Seed of the evaluation games.", metavar="N")]
_EvalJsonPathOption = Annotated[
    Path | None,
    typer.Option(
        "--json",
        help="Result file.",
        show_default="RUN/evals/AGENT-ITERATION.json",
        metavar="FILE",
    ),
]


@app.command("eval")
def evaluate(
    run: _EvalRunOption,
    opponent: _EvalOpponentOption = None,
    games: _EvalGamesOption = None,
    agent: _EvalAgentOption = None,
    simulations: _EvalSimulationsOption = None,
    episodes: _EvalEpisodesOption = None,
    greedy: _EvalGreedyOption = None,
    opening_plies: _EvalOpeningPliesOption = None,
    step: _EvalStepOption = None,
    seed: _EvalSeedOption = 0,
    json_path: _EvalJsonPathOption = None,
) -> None:
    """Evaluate a trained run. AlphaZero and MuZero: play baselines (W/D/L per colour, 95%
    intervals, Elo). PPO: the mean return of N episodes with its 95% interval."""
    given = {"opponent": opponent, "games": games, "agent": agent, "simulations": simulations}
    given |= {"opening_plies": opening_plies, "episodes": episodes, "greedy": greedy}
    # Every option is checked against the run's configuration before any checkpoint is
    # read (seconds, perhaps) and the evaluation starts (minutes, perhaps).
    try:
        preset = read_preset(run)
        if json_path is None:
            check_writable(run / runs.EVAL_DIR, "json")
        else:
            check_writable(json_path, "json", file=True)
    except runs.RunError as error:
        _fail(str(error))
    recipe = preset.recipe
    for other in RECIPES.values():
        flags = [_EVAL_FLAGS.get(name, "--" + name.replace("_", "-")) for name in other.eval_options
                 if given[name] is not None and name not in recipe.eval_options]  # fmt: skip
        if flags:
            _fail(f"{', '.join(flags)} applies to {other.name} runs; {run} is a {recipe.name} run")
    options = {name: given[name] for name in recipe.eval_options}
    try:
        judge = evaluator(recipe, preset.make_env())
        judge.check_eval(options)
        loaded = runs.load_runs(run, step=step)
    except (runs.RunError, ValueError, ImportError) as error:  # (a missing env package)
        _fail(str(error))
    results = []
    for one in loaded:
        try:
            result, name, lines = judge.evaluate_run(one, options, seed=seed)
        except runs.RunError as error:
            _fail(str(error))
        for line in lines:
            typer.echo(line)
        results.append(result)
    if len(loaded) > 1:
        result = {"seeds": {one.seed: r for one, r in zip(loaded, results)}}
        result["across_seeds"] = across_seeds([judge.headline(r) for r in results])
        for what, interval in result["across_seeds"].items():
            typer.echo(
                f"{what}, mean of {interval['seeds']} seeds: {interval['mean']:.3f} "
                f"[{interval['low']:.3f}, {interval['high']:.3f}] (95% interval over the seeds)"
            )
    iteration = loaded[0].iteration
    path = json_path or run / runs.EVAL_DIR / f"{name}-{iteration}.json"
    runs.write_json(path, result)  # (a default path that cannot be written: an OSError)
    typer.echo(f"wrote {path}")


# `azx eval` options whose flag is not `--` + the name with dashes.
_EVAL_FLAGS = {"greedy": "--greedy/--sample"}


@app.command()
def play(
    run: Annotated[Path, typer.Option(help="Run directory written by azx train.", metavar="DIR")],
    second: Annotated[bool, typer.Option("--second", help="Let the agent move first.")] = False,
    simulations: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="Search simulations.",
            show_default="the run's evaluation search's",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the game (who is which player).", metavar="N")
    ] = 0,
) -> None:
    """Play against the trained agent in the terminal; illegal moves are asked again."""
    from ._play import play as play_game

    if sys.stdin is None or sys.stdin.closed:
        _fail("azx play reads your moves from standard input, which is closed")
    loaded = _load(run, None)
    if not isinstance(loaded.preset.recipe, presets.AbstractAgentRecipe):
        _fail(
            f"azx play plays board games against AlphaZero and MuZero runs; {run} is a "
            f"{loaded.algorithm} run"
        )
    player = loaded.agent("search", num_simulations=simulations)

    def read(prompt: str) -> str:
        typer.echo(prompt, nl=False)
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):  # closed under us, or not text
            line = ""
        if not line:
            raise EOFError
        if not sys.stdin.isatty():
            typer.echo(line.rstrip("\n"))
        return line

    try:
        play_game(
            loaded.env, player, human_first=not second, seed=seed, read=read, write=typer.echo
        )
    except ValueError as error:
        _fail(str(error))
    except EOFError:
        typer.echo("\ninput ended; game abandoned.")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
