"""The `azx` command: `azx train`, `azx eval`, `azx play`.

Bad input (an unknown preset, a run directory that does not fit, an opponent that does
not parse) prints one line naming the problem and exits with status 2.
"""

import sys
from pathlib import Path
from typing import Annotated

import typer

from . import presets, run as runs


app = typer.Typer(
    help="AlphaZero in JAX: train an agent, evaluate it against baselines, play it.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _fail(message: str) -> None:
    typer.echo(f"azx: error: {message}", err=True)
    raise typer.Exit(2)


def _load(directory: Path, step: int | None) -> runs.Run:
    try:
        return runs.load_run(directory, step=step)
    except runs.RunError as error:
        _fail(str(error))


@app.command()
def train(
    env: Annotated[
        str | None,
        typer.Option(help="Game to learn; picks its preset. Default: tic_tac_toe."),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(help=f"Training setup: {', '.join(presets.names())}. Default: the env's."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Run directory. Default: runs/<preset>-seed<seed>."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed. Default: 0.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its newest checkpoint.")
    ] = False,
    iterations: Annotated[
        int | None, typer.Option(min=1, help="Training iterations. Default: the preset's.")
    ] = None,
    eval_every: Annotated[
        int | None,
        typer.Option(min=1, help="Iterations between evaluations and checkpoints."),
    ] = None,
    eval_games: Annotated[
        int | None, typer.Option(min=2, help="Games per evaluation match (even).")
    ] = None,
    opponent: Annotated[
        list[str] | None,
        typer.Option(
            help="Evaluation opponent, repeatable: random, greedy, mcts:N or solver. "
            "Default: the preset's."
        ),
    ] = None,
    log_every: Annotated[
        int | None, typer.Option(min=1, help="Iterations per logged training call.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Train an AlphaZero agent; writes config.json, metrics.jsonl, checkpoints and
    learning_curve.png into the run directory. Ctrl-C stops after saving a checkpoint."""
    try:
        runs.train(
            out,
            preset=preset,
            env=env,
            seed=seed,
            resume=resume,
            iterations=iterations,
            eval_every=eval_every,
            eval_games=eval_games,
            opponents=opponent or None,
            log_every=log_every,
            quiet=quiet,
        )
    except runs.RunError as error:
        _fail(str(error))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command("eval")
def evaluate(
    run: Annotated[Path, typer.Option(help="Run directory written by azx train.")],
    opponent: Annotated[
        list[str],
        typer.Option(help="random, greedy, mcts:N (rollout MCTS) or solver; repeatable."),
    ] = ["random"],  # noqa: B006 (typer reads the default)
    games: Annotated[int, typer.Option(min=2, help="Games per opponent (even).")] = 200,
    agent: Annotated[
        str, typer.Option(help="search (network + search) or network (policy argmax).")
    ] = "search",
    simulations: Annotated[
        int | None,
        typer.Option(min=1, help="Search simulations. Default: the run's training number."),
    ] = None,
    step: Annotated[
        int | None, typer.Option(help="Checkpoint (iteration) to load. Default: the newest.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the evaluation games.")] = 0,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Result file. Default: <run>/evals/<agent>-<iteration>.json."),
    ] = None,
) -> None:
    """Play the trained agent against baselines: W/D/L, per colour, with 95% intervals."""
    import jax

    from . import arena

    if games % 2:
        _fail(f"--games must be even (half the games with each colour), got {games}")
    if agent not in ("search", "network"):
        _fail(f"--agent must be 'search' or 'network', got {agent!r}")
    loaded = _load(run, step)
    for spec in opponent:
        try:
            arena.opponent(spec, loaded.env)
        except ValueError as error:
            _fail(str(error))
    player = loaded.agent(agent, num_simulations=simulations)
    results = runs.evaluate(
        loaded.env, {agent: player}, opponent, num_games=games, key=jax.random.key(seed)
    )[agent]
    label = agent if agent == "network" else f"{agent} ({player.search.num_simulations} sims)"
    typer.echo(f"{run} at iteration {loaded.iteration}, {label}:")
    for spec, record in results.items():
        typer.echo(f"  vs {spec}: {runs.describe(record)}")
    if len(results) > 1:
        ratings = arena.elo_ratings(
            {("azx", spec): (r["wins"], r["draws"], r["losses"]) for spec, r in results.items()},
            anchor="azx",
            prior_draws=1.0,
        )
        typer.echo(
            "  Elo relative to the agent (1 prior draw per pair): "
            + ", ".join(
                f"{name} {rating:+.0f} [{low:+.0f}, {high:+.0f}]"
                for name, (rating, low, high) in ratings.items()
                if name != "azx"
            )
        )
    result = {
        "run": str(run),
        "iteration": loaded.iteration,
        "agent": agent,
        "num_simulations": None if agent == "network" else player.search.num_simulations,
        "seed": seed,
        "results": results,
    }
    path = json_path or run / runs.EVAL_DIR / f"{agent}-{loaded.iteration}.json"
    runs._write_json(path, result)
    typer.echo(f"wrote {path}")


@app.command()
def play(
    run: Annotated[Path, typer.Option(help="Run directory written by azx train.")],
    second: Annotated[bool, typer.Option("--second", help="Let the agent move first.")] = False,
    simulations: Annotated[
        int | None,
        typer.Option(min=1, help="Search simulations. Default: the run's training number."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the game (who is which player).")] = 0,
) -> None:
    """Play against the trained agent in the terminal; illegal moves are asked again."""
    from ._play import play as play_game

    loaded = _load(run, None)
    player = loaded.agent("search", num_simulations=simulations)

    def read(prompt: str) -> str:
        typer.echo(prompt, nl=False)
        line = sys.stdin.readline()
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
