"""The guide's dice game (docs/environments.md, "A game with chance: Pig") trained longer
than the guide can afford, and judged by the game's exact solution.

    python -m benchmarks.pig [--iterations 8000] [--simulations 16] [--games 2000]
                             [--chance-expectation]

The game, its exact solution, the judge (`optimal`) and the exact player come from the
guide's own code blocks, run here as they are, so that the benchmark measures the
guide's game. Training is the guide's, with `--iterations`. Printed: the share of the
positions where the choice matters (both moves legal, winning chances at least 0.01,
0.02, 0.05 and 0.1 apart) where the network alone, and the network with a noiseless
search of 64 and of 256 simulations, plays a best move; and a match of `--games` games
of the network with the 64-simulation search against the exact player, with the 95%
interval of its score (0.5 is what the exact player scores against itself).
`--chance-expectation` has every search (training's and the judged ones) value a new
chance node by the expectation over its outcomes instead of one sampled outcome.
"""

import argparse
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

import azx


_GUIDE = Path(__file__).resolve().parent.parent / "docs" / "environments.md"


def guide_namespace() -> dict:
    """The guide's Pig section up to its training: the game, the solution, the judge."""
    text = _GUIDE.read_text()
    section = text[text.index("## A game with chance: Pig") : text.index("## Training Pig")]
    blocks = section.split("```python\n")[1:]
    namespace: dict = {}
    for block in blocks:
        exec(block[: block.index("```")], namespace)  # noqa: S102 (the guide's own code)
    return namespace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8000)
    parser.add_argument("--simulations", type=int, default=16, help="self-play search")
    parser.add_argument("--games", type=int, default=2000, help="match against exact play")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chance-expectation", action="store_true")
    args = parser.parse_args()

    guide = guide_namespace()
    env, positions, optimal = guide["env"], guide["positions"], guide["optimal"]
    start = time.perf_counter()
    net = azx.nets.MLP(
        env.observation_shape, env.num_actions, width=64, depth=2, key=jax.random.key(0)
    )
    config = azx.alphazero.Config(
        num_envs=32,
        collect_steps=8,
        train_steps=8,
        batch_size=128,
        buffer_capacity=4096,
        learning_rate=3e-3,
        decay_iterations=args.iterations,
    )
    expectation = args.chance_expectation
    search = azx.search.make(
        "gumbel", args.simulations, max_depth=2, chance_expectation=expectation
    )
    trainer = azx.alphazero.AlphaZero(env, search, config)
    state = trainer.init(net, key=jax.random.key(1 + args.seed))
    state = eqx.filter_jit(trainer.train)(state, args.iterations)
    net = state.net
    print(f"trained {args.iterations} iterations in {time.perf_counter() - start:.0f} s")

    batch = jax.tree.leaves(positions)[0].shape[0]
    logits, _ = jax.vmap(net)(jax.vmap(env.observation)(positions))
    players = {"network alone": jnp.argmax(logits, axis=-1)}
    for simulations in (64, 256):
        judged = azx.search.make(
            "gumbel", simulations, gumbel_scale=0.0, max_depth=2, chance_expectation=expectation
        )
        searched = judged(net, env, judged.init(env, batch), positions, key=jax.random.key(2))
        players[f"network + search ({simulations} simulations)"] = searched.action
    for name, actions in players.items():
        shares = ", ".join(
            f"margin >= {at_least}: {optimal(actions, at_least):.1%}"
            for at_least in (0.01, 0.02, 0.05, 0.1)
        )
        print(f"{name}: a best move in {shares}")
    judged = azx.search.make(
        "gumbel", 64, gumbel_scale=0.0, max_depth=2, chance_expectation=expectation
    )
    result = eqx.filter_jit(azx.arena.play_match)(
        env,
        azx.arena.SearchAgent(net, judged),
        guide["exact"],
        num_games=args.games,
        key=jax.random.key(3 + args.seed),
    )
    print(f"against the exact player: {result}")


if __name__ == "__main__":
    main()
