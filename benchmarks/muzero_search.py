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


def measure(batch: int, simulations: int, repeats: int, num_actions: int = 4, *, report=None):
    """Each search's record: its compile seconds (`compile_s`), then its median seconds
    per batched search over `repeats` calls (`seconds`) and `batch / seconds` self-play
    steps a second (`steps_per_s`). `report(record)`, if given, sees each record as it
    is made."""
    net = mz.mlp_net(
        (8,), num_actions, embedding_size=64, width=128, support_size=20, key=jax.random.key(0)
    )
    model = mz.LearnedModel(net=net, gamma=0.997)
    roots = mz.Observation(
        observation=jax.random.normal(jax.random.key(1), (batch, 8)),
        legal_action_mask=jnp.ones((batch, num_actions), bool),
    )
    searches = {
        "native puct": azx.search.PUCT(simulations, gamma=0.997),
        "mctx muzero_policy": azx.search.MctxPUCT(simulations, gamma=0.997),
        "native gumbel": azx.search.Gumbel(simulations, gamma=0.997),
        "mctx gumbel_muzero_policy": azx.search.MctxGumbel(simulations, gamma=0.997),
    }

    @eqx.filter_jit
    def run(search, model, roots, key):
        tree = search.init_for_states(jnp.zeros(64), num_actions, batch)
        out = search.search(model, tree, roots, key=key)
        return out.action, out.policy_target, out.root_value

    records = []
    for name, search in searches.items():
        start = time.perf_counter()
        compiled = run.lower(search, model, roots, jax.random.key(0)).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(compiled(search, model, roots, jax.random.key(0)))
        times = []
        for repeat in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(search, model, roots, jax.random.key(1 + repeat)))
            times.append(time.perf_counter() - start)
        median = float(np.median(times))
        record = {
            "search": name,
            "batch": batch,
            "num_simulations": simulations,
            "num_actions": num_actions,
            "seconds": median,
            "steps_per_s": batch / median,
            "compile_s": compile_s,
        }
        records.append(record)
        if report is not None:
            report(record)
    return records


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-actions", type=int, default=4)
    args = parser.parse_args(argv)

    def report(record):
        print(
            f"{record['search']:28s} {1000 * record['seconds']:8.1f} ms per search  "
            f"{record['steps_per_s']:9.0f} self-play steps/s",
            flush=True,
        )

    print(f"batch {args.batch}, {args.simulations} simulations, {jax.devices()[0].platform}")
    measure(args.batch, args.simulations, args.repeats, args.num_actions, report=report)


if __name__ == "__main__":
    main()
