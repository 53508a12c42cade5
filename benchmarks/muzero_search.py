"""The search over a learned model: native PUCT and Gumbel against mctx's
`muzero_policy` and `gumbel_muzero_policy`, on identical inputs (the same MuZero networks,
observations and keys).

    python -m benchmarks.muzero_search [--batch 256] [--simulations 32] [--repeats 5]

Prints each search's median time per batched search over `--repeats` calls (after one
compiling call) and the self-play steps per second that gives (`batch / time`).
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import azx
import azx.muzero as mz


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-actions", type=int, default=4)
    args = parser.parse_args(argv)
    net = mz.mlp_net(
        (8,), args.num_actions, embedding_size=64, width=128, support_size=20, key=jax.random.key(0)
    )
    model = mz.LearnedModel(net=net, gamma=0.997)
    roots = mz.Observation(
        observation=jax.random.normal(jax.random.key(1), (args.batch, 8)),
        legal_action_mask=jnp.ones((args.batch, args.num_actions), bool),
    )
    searches = {
        "native puct": azx.search.PUCT(args.simulations, gamma=0.997),
        "mctx muzero_policy": azx.search.MctxPUCT(args.simulations, gamma=0.997),
        "native gumbel": azx.search.Gumbel(args.simulations, gamma=0.997),
        "mctx gumbel_muzero_policy": azx.search.MctxGumbel(args.simulations, gamma=0.997),
    }

    @eqx.filter_jit
    def run(search, model, roots, key):
        tree = search.init_for_states(jnp.zeros(64), args.num_actions, args.batch)
        out = search.search(model, tree, roots, key=key)
        return out.action, out.policy_target, out.root_value

    print(f"batch {args.batch}, {args.simulations} simulations, {jax.devices()[0].platform}")
    for name, search in searches.items():
        jax.block_until_ready(run(search, model, roots, jax.random.key(0)))
        times = []
        for repeat in range(args.repeats):
            start = time.perf_counter()
            jax.block_until_ready(run(search, model, roots, jax.random.key(1 + repeat)))
            times.append(time.perf_counter() - start)
        median = float(np.median(times))
        print(
            f"{name:28s} {1000 * median:8.1f} ms per search  "
            f"{args.batch / median:9.0f} self-play steps/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
