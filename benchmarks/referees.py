"""The referees of the games with chance, measured against each other and against random.

    python -m benchmarks.referees backgammon [--games 400] [--seed 2026]
    python -m benchmarks.referees gnubg [--games 400] [--seed 2026]
    python -m benchmarks.referees 2048 [--games 8] [--depth 2] [--seed 0]

backgammon: pubeval against a random agent, then against itself (whose points per game
must be 0 up to the interval), in points per game with gammons and backgammons counted
by the rules. gnubg: GNU Backgammon at its weakest and strongest 0-ply levels against
pubeval (needs `pip install 'azx[gnubg]'`). 2048: the expectimax player of `--depth` (0:
the random agent), its mean score and the share of games whose largest tile reaches each
power of two. Each line gives the wall time of the whole call, compilation included.
"""

import argparse
import time

import equinox as eqx
import jax
import numpy as np

import azx
from azx.arena import (
    Expectimax2048Agent,
    GnubgAgent,
    PubevalAgent,
    RandomAgent,
    backgammon_match,
    evaluate_2048,
)


def backgammon(games: int, seed: int) -> None:
    env = azx.envs.make("backgammon")
    match = eqx.filter_jit(backgammon_match)
    for name, opponent in (("random", RandomAgent()), ("pubeval", PubevalAgent())):
        start = time.perf_counter()
        result = match(env, PubevalAgent(), opponent, num_games=games, key=jax.random.key(seed))
        points, first = np.asarray(result.points), np.asarray(result.a_moved_first)
        print(
            f"pubeval against {name}: {result}; moving first {points[first].mean():+.3f}, "
            f"second {points[~first].mean():+.3f} ({time.perf_counter() - start:.1f} s)"
        )


def gnubg(games: int, seed: int) -> None:
    env = azx.envs.make("backgammon")
    match = eqx.filter_jit(backgammon_match)
    for level in ("beginner", "expert"):
        start = time.perf_counter()
        result = match(
            env, GnubgAgent(level), PubevalAgent(), num_games=games, key=jax.random.key(seed)
        )
        print(f"gnubg:{level} against pubeval: {result} ({time.perf_counter() - start:.1f} s)")


def game_2048(games: int, depth: int, seed: int) -> None:
    env = azx.envs.make("2048")
    agent = Expectimax2048Agent(depth) if depth else RandomAgent()
    start = time.perf_counter()
    result = eqx.filter_jit(evaluate_2048)(env, agent, num_games=games, key=jax.random.key(seed))
    print(f"{'random' if depth == 0 else f'expectimax:{depth}'}: {result}")
    print(f"  scores {np.asarray(result.score).astype(int).tolist()}")
    print(f"  largest tiles {np.asarray(result.largest_tile).tolist()}")
    print(f"  ({time.perf_counter() - start:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("backgammon", "gnubg", "2048"))
    parser.add_argument("--games", type=int, default=None)
    parser.add_argument("--depth", type=int, default=2, choices=(0, 1, 2))
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if args.game in ("backgammon", "gnubg"):
        run = backgammon if args.game == "backgammon" else gnubg
        run(args.games or 400, 2026 if args.seed is None else args.seed)
    else:
        game_2048(args.games or 8, args.depth, 0 if args.seed is None else args.seed)


if __name__ == "__main__":
    main()
