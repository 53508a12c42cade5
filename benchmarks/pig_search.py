"""The searches judged on the guide's Pig (docs/environments.md, "A game with chance: Pig")
with the game's exact solution as their network, so that every miss is the search's own.

    python -m benchmarks.pig_search

The network maps a position to the exact value of its mover (twice the winning chance
under best play, less one) and uniform logits. Printed for each search, without noise,
with a new chance node valued by one sampled outcome (the default) and by the expectation
over its outcomes (`chance_expectation=True`): the share of the positions where the
choice matters (as the guide's judge counts them) where it plays a best move, at a margin
of 0.01 or more (0.05 in brackets), and, natively, the mean absolute error of the root's
Q of rolling and of holding against their exact values.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

import azx

from .pig import guide_namespace


def exact_net(env, roll, hold):
    """ONE observation in, uniform logits and the mover's exact value out."""
    win = jnp.asarray(np.maximum(roll, hold), jnp.float32)
    goal = env.goal

    def net(observation):
        me, other, total = (
            jnp.sum(observation[i * goal : (i + 1) * goal]).astype(jnp.int32) for i in range(3)
        )
        value = 2.0 * win[me, other, total] - 1.0  # out of range only at terminal states
        return jnp.zeros(env.num_actions), value

    return net


def searches() -> dict:
    make = azx.search.make
    return {
        "PUCT 64, full depth": make("puct", 64, temperature=0.0, dirichlet_fraction=0.0),
        "PUCT 256, full depth": make("puct", 256, temperature=0.0, dirichlet_fraction=0.0),
        "PUCT 64, max_depth 2": make(
            "puct", 64, temperature=0.0, dirichlet_fraction=0.0, max_depth=2
        ),
        "Gumbel 16, full depth": make("gumbel", 16, gumbel_scale=0.0),
        "Gumbel 64, full depth": make("gumbel", 64, gumbel_scale=0.0),
        "Gumbel 16, max_depth 2": make("gumbel", 16, gumbel_scale=0.0, max_depth=2),
        "Gumbel 64, max_depth 2": make("gumbel", 64, gumbel_scale=0.0, max_depth=2),
        "Gumbel 16, max_depth 1": make("gumbel", 16, gumbel_scale=0.0, max_depth=1),
        "PUCT 64, max_depth 1": make(
            "puct", 64, temperature=0.0, dirichlet_fraction=0.0, max_depth=1
        ),
        "mctx PUCT 64, full depth": make(
            "puct", 64, backend="mctx", temperature=0.0, dirichlet_fraction=0.0
        ),
        "mctx PUCT 256, full depth": make(
            "puct", 256, backend="mctx", temperature=0.0, dirichlet_fraction=0.0
        ),
    }


def main() -> None:
    guide = guide_namespace()
    env, positions, optimal = guide["env"], guide["positions"], guide["optimal"]
    roll, hold = guide["roll"], guide["hold"]
    me, other, total = guide["me"], guide["other"], guide["total"]
    net = exact_net(env, roll, hold)
    exact_q = np.stack([2 * roll - 1, 2 * hold - 1], axis=-1)[me, other, total]
    batch = len(me)
    print(f"always rolling: {optimal(np.zeros(batch, int)):.1%}")
    for name, search in searches().items():
        start = time.perf_counter()
        lines = []
        for chance_expectation in (False, True):
            searching = dataclasses.replace(search, chance_expectation=chance_expectation)
            output = jax.jit(
                lambda state, searching=searching: searching(
                    net, env, searching.init(env, batch), state, key=jax.random.key(2)
                )
            )(positions)
            line = f"{optimal(output.action):.1%} ({optimal(output.action, 0.05):.1%})"
            if isinstance(output.tree, azx.search.Tree):
                q = np.asarray(output.tree.edge_q[:, 0, :2])
                error = np.abs(q - exact_q).mean(axis=0)
                line += f", |Q error| roll {error[0]:.4f}, hold {error[1]:.4f}"
            lines.append(line)
        print(
            f"{name}: one sample {lines[0]}; expectation {lines[1]} "
            f"[{time.perf_counter() - start:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main()
