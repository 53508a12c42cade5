"""Checkpoints against each other: is a later network stronger than an earlier one?

    python -m benchmarks.checkpoints runs/othello-seed0@500 runs/othello-seed0@1000 \
        [other-run@1000 ...] [--agent network] [--games 200] [--opening-plies 4]

Every pair of the listed checkpoints (`RUN_DIR@ITERATION`, or `RUN_DIR` for its newest)
plays `--games` games, half with each colour, and Elo ratings come from all the results
(the first checkpoint rated 0). An evaluation against one fixed opponent can miss
progress (or invent it) when strengths are not transitive; the checkpoints' own games
say directly whether training made the agent better.

The agents play greedily, so two of them would repeat one game per colour: the first
`--opening-plies` plies of every game are uniformly random legal moves, for varied games
(the agents' searches still follow those moves, as they follow an opponent's).
"""

import argparse
import itertools

import equinox as eqx
import jax

import azx
from azx._rundir import split_checkpoint_spec
from azx.arena import RandomOpening


def load(spec: str) -> tuple[str, azx.run.Run]:
    directory, step = split_checkpoint_spec(spec)
    try:
        run = azx.load_run(directory, step=step)
    except azx.run.RunError as error:
        raise SystemExit(f"checkpoint {spec!r}: {error}") from None
    return f"{directory}@{run.iteration}", run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoints", nargs="+", metavar="RUN_DIR[@ITERATION]")
    parser.add_argument("--agent", choices=("search", "network"), default="search")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--opening-plies", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if len(args.checkpoints) < 2:
        parser.error("give at least two checkpoints")
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be even and at least 2, got {args.games}")
    if args.opening_plies < 0:
        parser.error(f"--opening-plies must be >= 0, got {args.opening_plies}")
    runs = dict(load(spec) for spec in args.checkpoints)
    env = next(iter(runs.values())).env
    for name, run in runs.items():
        if getattr(run.env, "name", None) != getattr(env, "name", None):
            raise SystemExit(f"{name} plays {run.env.name!r}, not {env.name!r}")
    agents = {
        name: RandomOpening(run.agent(args.agent), args.opening_plies, run.env)
        for name, run in runs.items()
    }
    results = {}
    # One jitted function for all pairs: checkpoints of the same setup differ only in
    # their weights (traced), so the match compiles once.
    match = eqx.filter_jit(azx.arena.play_match)
    for index, (a, b) in enumerate(itertools.combinations(agents, 2)):
        result = match(
            env,
            agents[a],
            agents[b],
            num_games=args.games,
            key=jax.random.fold_in(jax.random.key(args.seed), index),
        )
        results[a, b] = result.counts
        low, high = result.score_interval()
        print(
            f"{a} vs {b} ({args.agent}): {result.wins}/{result.draws}/{result.losses}, "
            f"score {result.score:.3f} [{low:.3f}, {high:.3f}]",
            flush=True,
        )
    if len(agents) > 2:
        ratings = azx.arena.elo_ratings(results, anchor=next(iter(agents)))
        for name, (rating, low, high) in sorted(ratings.items(), key=lambda item: -item[1][0]):
            print(f"Elo {name}: {rating:+.0f} [{low:+.0f}, {high:+.0f}]")


if __name__ == "__main__":
    main()
