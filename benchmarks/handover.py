"""In which part of the game does a trained agent lose to an opponent?

    python -m benchmarks.handover RUN_DIR[@ITERATION] --opponent mcts:200 \
        --plies 0 10 20 30 [--late] [--games 100] [--agent search]

For each N of `--plies`, a match of `--games` games (half with each colour) against the
opponent, where the run's side is played by the opponent's own algorithm (a second copy
of it) for the first N plies of each game and by the run's agent from then on. N = 0 is
the run's agent alone. If the score rises with N, the agent loses ground in the first N
plies: the positions it reaches there are worse than those the opponent's algorithm
reaches. With `--late` the order is reversed: the run's agent plays the first N plies and
the opponent's algorithm the rest, which measures what the agent's early play is worth.
"""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

import azx
from azx.arena import AbstractAgent

from .checkpoints import load


class Handover(AbstractAgent):
    """`early` plays the first `plies` plies of each game, `late` the rest; both follow
    every move, so that each one's state (a search tree) stays in step with the game."""

    early: AbstractAgent
    late: AbstractAgent
    plies: int = eqx.field(static=True)

    def init(self, env, batch_size: int) -> PyTree:
        return (
            self.early.init(env, batch_size),
            self.late.init(env, batch_size),
            jnp.zeros(batch_size, jnp.int32),
        )

    def __call__(self, env, agent_state, env_state, *, key) -> tuple[Int[Array, " batch"], PyTree]:
        early_state, late_state, plies = agent_state
        early_key, late_key = jax.random.split(key)
        early_action, early_state = self.early(env, early_state, env_state, key=early_key)
        late_action, late_state = self.late(env, late_state, env_state, key=late_key)
        action = jnp.where(plies < self.plies, early_action, late_action).astype(jnp.int32)
        return action, (early_state, late_state, plies)

    def observe(self, agent_state, action, done: Bool[Array, " batch"]) -> PyTree:
        early_state, late_state, plies = agent_state
        return (
            self.early.observe(early_state, action, done),
            self.late.observe(late_state, action, done),
            jnp.where(done, 0, plies + 1),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", metavar="RUN_DIR[@ITERATION]")
    parser.add_argument("--opponent", required=True)
    parser.add_argument("--plies", type=int, nargs="+", required=True)
    parser.add_argument("--late", action="store_true")
    parser.add_argument("--agent", choices=("search", "network"), default="search")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be even and at least 2, got {args.games}")
    if any(n < 0 for n in args.plies):
        parser.error(f"--plies must be >= 0, got {args.plies}")
    name, run = load(args.run)
    agent = run.agent(args.agent)
    opponent = azx.arena.opponent(args.opponent, run.env)
    match = eqx.filter_jit(azx.arena.play_match)
    for n in args.plies:
        if args.late:
            player, what = Handover(agent, opponent, n), f"{args.agent} for {n} plies, then"
        else:
            player, what = Handover(opponent, agent, n), f"{args.opponent} for {n} plies, then"
        result = match(
            run.env, player, opponent, num_games=args.games, key=jax.random.key(args.seed)
        )
        low, high = result.score_interval()
        rest = args.opponent if args.late else args.agent
        print(
            f"{name}: {what} {rest}, vs {args.opponent}: "
            f"{result.wins}/{result.draws}/{result.losses}, score {result.score:.3f} "
            f"[{low:.3f}, {high:.3f}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
