"""Stochastic MuZero on the dice race over several seeds: how often the search over the
learned model plays a best move where the choice matters, against the exact values.

    python -m benchmarks.stochastic_dice [--seeds 0 1 2 3 4] [--set KEY=VALUE ...]
                                         [--json PATH]

Each seed trains preset `stochastic_muzero_dice` (changed by `--set`, as `azx train --set`
changes it) for its iterations in calls of `log_every` iterations, as `azx train` does
between evaluations. Then the preset's evaluation search over the trained model plays
every reachable position of the race where the choice matters (the moves' exact `Q`,
from `azx.envs.dice_race_q`, at least `MARGIN` apart), and the line gives the share of
those where it plays a best move, beside always rolling's share.
"""

import argparse
import json
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import azx
import azx.muzero as mz
from benchmarks.muzero_cartpole import train_in_chunks


MARGIN = 0.01
"""The least difference between the moves' exact values for the choice to matter."""


def race_states(game: azx.envs.DiceRace, positions, moves):
    """A batch of the race's states, not over, at the given squares and move counts."""
    start = game.init(jax.random.key(0))
    return jax.vmap(lambda p, m: eqx.tree_at(lambda s: (s.position, s.moves), start, (p, m)))(
        jnp.asarray(positions, jnp.int32), jnp.asarray(moves, jnp.int32)
    )


def judge_dice_race(env: azx.envs.DiceRace, net, search) -> tuple[float, float, int]:
    """The share of the race's reachable positions where the choice matters in which
    `search` over `net`'s learned model plays a best move, always rolling's share, and how
    many positions those are."""
    q = azx.envs.dice_race_q(env)
    reached, rows = {0}, []
    for moves in range(env.moves):
        rows += [(position, moves) for position in sorted(reached) if position < env.goal]
        reached = {p + a for p in reached for a in (1, 0, 2, 4)}
    position, moves = (np.asarray(x) for x in zip(*rows, strict=True))
    margin = np.abs(q[position, moves, 0] - q[position, moves, 1])
    best = q[position, moves].argmax(-1)
    matters = margin >= MARGIN
    states = race_states(env, position[matters], moves[matters])
    keys = jax.random.split(jax.random.key(0), int(matters.sum()))
    action = eqx.filter_jit(mz.stochastic_search_states)(search, net, env, states, key=keys).action
    best = best[matters]
    return (
        float(np.mean(np.asarray(action) == best)),
        float(np.mean(best == 1)),
        int(matters.sum()),
    )


def run_seed(preset: azx.presets.Preset, seed: int) -> dict:
    trainer, state = preset.build(seed=seed)
    start = time.perf_counter()
    for state, _, _, _ in train_in_chunks(
        trainer.train_and_record, state, preset.iterations, preset.log_every
    ):
        pass
    seconds = time.perf_counter() - start
    share, always_roll, positions = judge_dice_race(
        trainer.env, state.net, preset.recipe.make_eval_search()
    )
    return {
        "seed": seed,
        "best_move_share": share,
        "best_moves": round(share * positions),
        "positions": positions,
        "always_roll_share": always_roll,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", dest="settings", nargs="+", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    preset = azx.presets.get("stochastic_muzero_dice").changed(settings=args.settings)
    rows = []
    for seed in args.seeds:
        row = run_seed(preset, seed)
        rows.append(row)
        print(
            f"seed {seed}: a best move in {row['best_moves']} of {row['positions']} positions "
            f"({row['best_move_share']:.3f}; always rolling {row['always_roll_share']:.3f}), "
            f"trained in {row['seconds']:.0f} s",
            flush=True,
        )
    shares = [row["best_move_share"] for row in rows]
    print(
        f"settings {args.settings or 'none'}: mean {np.mean(shares):.3f}, lowest "
        f"{min(shares):.3f}, {sum(s >= 0.95 for s in shares)} of {len(shares)} seeds at 0.95"
    )
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"settings": args.settings, "seeds": rows}, file, indent=2)


if __name__ == "__main__":
    main()
