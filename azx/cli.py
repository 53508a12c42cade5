"""The `azx` command: `azx train`, `azx eval`, `azx play`, for AlphaZero, MuZero and PPO
runs.

Bad input (an unknown preset, a run directory that does not fit, an opponent that does
not parse, a flag value out of range) prints one line naming the problem and exits with
status 2. The library's errors name its arguments in backquotes (`` `resume` ``); this
module turns them into flags (`--resume`).
"""

import importlib
import inspect
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
from ._loop import TRAIN_OPTIONS
from ._preset import RECIPES, Option
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


def _parameter(option: Option, recipes: list[str] | None = None) -> inspect.Parameter:
    """The typer parameter of `option`; `recipes`: the algorithms it applies to, where
    not every one."""
    help = option.help
    if recipes is not None:
        help = f"{', '.join(recipes)}: {help[0].lower()}{help[1:]}"
    kind = option.type if option.default is not None else option.type | None
    is_flag = option.type is bool and option.flag is None
    typer_option = typer.Option(
        *([option.flags] if option.flag or is_flag else []),
        help=help,
        min=option.minimum,
        metavar=None if is_flag else option.metavar,
        show_default=option.shown,
    )
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=option.default,
        annotation=Annotated[kind, typer_option],
    )


def _recipe_options(which: str) -> list[tuple[Option, list[str]]]:
    """Every recipe's `train_options` or `eval_options` (`which`), each once, with the
    algorithms it applies to."""
    by_name: dict[str, tuple[Option, list[str]]] = {}
    for recipe in RECIPES.values():
        for option in getattr(recipe, which):
            by_name.setdefault(option.name, (option, []))[1].append(recipe.name)
    return list(by_name.values())


def command_parameters(command: str) -> list[tuple[Option, list[str] | None]]:
    """The options of `azx train` or `azx eval` (`command`), each with the algorithms it
    applies to (None: every one), as their flags and the docs' tables are made."""
    fixed, which = {"train": (_TRAIN, "train_options"), "eval": (_EVAL, "eval_options")}[command]
    return [(option, None) for option in fixed] + _recipe_options(which)


class _Command:
    """A command whose options come from their declarations when it runs (a recipe
    registered later brings its own)."""

    def __init__(self, body, command: str):
        self.body, self.command = body, command
        self.__name__, self.__doc__, self.__annotations__ = body.__name__, body.__doc__, {}

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature([_parameter(*one) for one in command_parameters(self.command)])

    def __call__(self, **options):
        return self.body(**options)


def _declared() -> dict[str, Option]:
    """Every option of `azx train` and `azx eval` by name (for messages)."""
    declared = {option.name: option for option in (*_TRAIN, *_EVAL, *TRAIN_OPTIONS)}
    for recipe in RECIPES.values():
        declared |= {o.name: o for o in (*recipe.train_options, *recipe.eval_options)}
    return declared


def _as_flags(message: str) -> str:
    """A library message with its `argument` names written as flags (`--argument`)."""
    declared = _declared()

    def flag(match: re.Match) -> str:
        name = match.group(1)
        return declared[name].flags if name in declared else match.group(0)

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


_TRAIN = (
    Option(
        "preset",
        str,
        f"What to train: a preset ({', '.join(presets.names())}), or pgx:GAME for any "
        "two-player pgx game with a generic AlphaZero setup (e.g. pgx:hex).",
        shown="tic_tac_toe",
        metavar="NAME",
    ),
    Option(
        "env",
        str,
        "Train the preset on another environment of the same kind (players, discrete or "
        "continuous actions), e.g. --preset ppo_pendulum --env "
        "gymnax:MountainCarContinuous-v0.",
        metavar="NAME",
    ),
    Option(
        "settings",
        list[str],
        "Change one of the preset's settings, repeatable: a field of the preset or of its "
        "config (eval_games=100, learning_rate=0.001) or a dotted path into an options "
        "dict (network_options.width=64, search.num_simulations=32); VALUE is JSON or a "
        "string. Recorded in config.json; --resume keeps them.",
        shown="none",
        metavar="KEY=VALUE",
        flag="--set",
    ),
    Option("out", Path, "Run directory.", shown="runs/PRESET-seedSEED", metavar="DIR"),
    Option("seed", int, "Random seed.", shown="0"),
    Option(
        "seeds",
        int,
        "Train N independent agents, seeds SEED to SEED+N-1, as one program; each seed's "
        "run goes to OUT/seed<S>, their curves together to OUT.",
        shown="1",
        minimum=1,
    ),
    Option(
        "resume",
        bool,
        "Continue the run in --out from its newest checkpoint, with its saved setup.",
        default=False,
        shown=False,
    ),
    *TRAIN_OPTIONS,
    Option(
        "log",
        list[str],
        "Experiment tracker, repeatable: tensorboard (event files in RUN/tensorboard/) or "
        "wandb (a Weights & Biases run; WANDB_MODE=offline keeps it in RUN/wandb/). Each "
        "is an extra: pip install 'azx[tensorboard]' or 'azx[wandb]'.",
        shown="none",
        metavar="TRACKER",
    ),
    Option("quiet", bool, "No progress output.", default=False, shown=False),
    Option(
        "coordinator",
        str,
        "Several processes: process 0's address and a free port (HOST:PORT), the same in "
        "every process. Inside a SLURM or Open MPI job of several tasks the three settings "
        "come from the job.",
        shown=False,
        metavar="HOST:PORT",
    ),
    Option("num_processes", int, "Several processes: how many take part.", shown=False),
    Option(
        "process_id",
        int,
        "Several processes: this process's number, 0 to N-1 (0 writes the files).",
        shown=False,
        metavar="I",
    ),
    Option(
        "join_timeout",
        float,
        "Several processes: seconds to wait for all of them to join.",
        default=_cluster.JOIN_SECONDS,
        shown=True,
        metavar="SECONDS",
    ),
)


def train(
    *,
    resume: bool,
    out: Path | None,
    coordinator: str | None,
    num_processes: int | None,
    process_id: int | None,
    join_timeout: float,
    quiet: bool,
    **options,
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
    options = {name: value or None if isinstance(value, list) else value
               for name, value in options.items()}  # fmt: skip
    try:
        runs.train(
            out,
            resume=resume,
            quiet=quiet,
            settings=options.pop("settings") or (),
            log=options.pop("log") or (),
            **options,
        )
    except runs.RunError as error:
        _fail(str(error))
    except runs.TrainingInterrupted as stop:
        if not others:
            typer.echo(f"continue with: azx train --out {stop.directory} --resume", err=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


app.command("train")(_Command(train, "train"))


_EVAL = (
    Option(
        "run", Path, "Run directory written by azx train.", default=..., shown=False, metavar="DIR"
    ),
    Option("step", int, "Checkpoint (iteration) to load.", shown="the newest", metavar="N"),
    Option("seed", int, "Seed of the evaluation games.", default=0, shown=True),
    Option(
        "json_path",
        Path,
        "Result file.",
        shown="RUN/evals/AGENT-ITERATION.json",
        metavar="FILE",
        flag="--json",
    ),
    Option(
        "record",
        Path,
        "Write each game the evaluation counts to DIR as SPEC-N.svg (an SVG animation) "
        "and SPEC-N.json (a record that azx explore --replays DIR steps through); in a "
        "single-player game, the agent's episodes as episode-N.",
        shown="none",
        metavar="DIR",
    ),
)


def evaluate(
    *, run: Path, step: int | None, seed: int, json_path: Path | None, record: Path | None, **given
):
    """Evaluate a trained run. AlphaZero and MuZero: play baselines (W/D/L per colour, 95%
    intervals, Elo). PPO: the mean return of N episodes with its 95% interval."""
    # Every option is checked against the run's configuration before any checkpoint is
    # read (seconds, perhaps) and the evaluation starts (minutes, perhaps).
    try:
        preset = read_preset(run)
        if json_path is None:
            check_writable(run / runs.EVAL_DIR, "json_path")
        else:
            check_writable(json_path, "json_path", file=True)
        if record is not None:
            check_writable(record, "record")
    except runs.RunError as error:
        _fail(str(error))
    recipe = preset.recipe
    if record is not None and not isinstance(recipe, presets.AbstractAgentRecipe):
        _fail(
            f"--record writes the games of AlphaZero and MuZero agents; {run} is a "
            f"{recipe.name} run"
        )
    given = {name: value or None if isinstance(value, list) else value
             for name, value in given.items()}  # fmt: skip
    own = {option.name for option in recipe.eval_options}
    for other in RECIPES.values():
        flags = [
            o.flags for o in other.eval_options if given[o.name] is not None and o.name not in own
        ]
        if flags:
            _fail(f"{', '.join(flags)} applies to {other.name} runs; {run} is a {recipe.name} run")
    options = {name: given[name] for name in own}
    try:
        judge = evaluator(recipe, preset.make_env())
        judge.check_eval(options)
        loaded = runs.load_runs(run, step=step)
    except (runs.RunError, ValueError, ImportError) as error:  # (a missing env package)
        _fail(str(error))
    results = []
    recorders = []
    for one in loaded:
        recorder = None
        if record is not None:
            where = record if len(loaded) == 1 else record / f"seed{one.seed}"
            recorder = _recorder(one, options, where, seed)
            recorders.append(recorder)
        try:
            result, name, lines = judge.evaluate_run(one, options, seed=seed, on_games=recorder)
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
    for recorder in recorders:
        for line in recorder.lines:
            typer.echo(line)


def _recorder(one: runs.Run, options: dict, directory: Path, seed: int):
    """`azx eval --record`'s writer of `one`'s evaluation games into `directory`."""
    from .explore._record import GamesRecorder

    return GamesRecorder(one, directory, seed=seed, simulations=options.get("simulations"))


app.command("eval")(_Command(evaluate, "eval"))


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
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Print why the agent plays each move: the network's prior and value, the "
            "search's visits and Q per move, the principal variation (each position "
            "searched from an empty tree).",
        ),
    ] = False,
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
            loaded.env,
            player,
            human_first=not second,
            seed=seed,
            read=read,
            write=typer.echo,
            explain=_explain_move() if explain else None,
        )
    except ValueError as error:
        _fail(str(error))
    except EOFError:
        typer.echo("\ninput ended; game abandoned.")


def _explain_move():
    """`azx play --explain`'s move: the explorer's analysis, printed (azx.explore needs
    nothing of its extra for it)."""
    from .explore import explain_move

    return explain_move


@app.command()
def explore(
    run: Annotated[
        list[Path],
        typer.Option(help="Run directory written by azx train (repeatable).", metavar="DIR"),
    ],
    replays: Annotated[
        list[Path] | None,
        typer.Option(help="Directory of games written by azx eval --record.", metavar="DIR"),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to serve on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: a free one).")] = 8000,
) -> None:
    """A local web page to play the agent and see the network's prior and value and the
    search's visits and Q per move; prints its address (pip install "azx[explore]")."""
    from . import explore as explorer

    try:
        explorer.serve(run, replays=replays or [], host=host, port=port, echo=typer.echo)
    except (runs.RunError, ImportError, OSError) as error:
        _fail(str(error))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
