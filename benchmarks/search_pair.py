"""The search before and after a change, in one process, timed in turns on identical inputs.

    cp -r OLD_CHECKOUT/azx /tmp/old/azx_base
    PYTHONPATH=/tmp/old python -m benchmarks.search_pair [--repeats N]

`azx_base` is a copy of an older `azx` package (its imports are relative, so it imports
under another name). For each of `benchmarks.search`'s connect-four cases (trivial and MLP
networks, batch 16 and 256, 32 and 64 simulations, PUCT and Gumbel), the old search is
compiled twice and the new one once, and the three are called in turns, one call each per
round; the table gives their median milliseconds and says where the new one falls outside
the two old timings (1% slack), so that the machine's noise and the change's cost can be
told apart.
"""

import argparse
import itertools
import math
import statistics
import sys
import time

import jax

import azx
from benchmarks.search import make_net, root_states


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds per case")
    args = parser.parse_args(argv)
    import azx_base

    env = azx.envs.make("connect_four")
    ratios, outside = [], 0
    cases = itertools.product(("trivial", "mlp"), (16, 256), (32, 64), ("puct", "gumbel"))
    for net_name, batch_size, num_simulations, algo in cases:
        net = make_net(net_name, env, jax.random.key(0))
        states = root_states(env, batch_size, 4, jax.random.key(1))
        key = jax.random.key(2)
        calls = {}
        for name, package in (("old", azx_base), ("old again", azx_base), ("new", azx)):
            search = package.search.make(algo, num_simulations)
            tree = search.init(env, batch_size)

            def call(tree, states, key, search=search):
                return search(net, env, tree, states, key=key)

            compiled = jax.jit(call).lower(tree, states, key).compile()
            jax.block_until_ready(compiled(tree, states, key))  # warm-up
            calls[name] = (compiled, tree)
        times = {name: [] for name in calls}
        for _ in range(args.repeats):
            for name, (compiled, tree) in calls.items():
                start = time.perf_counter()
                jax.block_until_ready(compiled(tree, states, key))
                times[name].append(time.perf_counter() - start)
        old, again, new = (1000 * statistics.median(times[name]) for name in calls)
        inside = min(old, again) * 0.99 <= new <= max(old, again) * 1.01
        outside += not inside
        ratios.append(new / old)
        print(
            f"{net_name:7} b={batch_size:<3} n={num_simulations:<2} {algo:6} "
            f"old {old:7.2f} {again:7.2f} ms  new {new:7.2f} ms  new/old {new / old:5.3f}"
            + ("" if inside else "  outside"),
            flush=True,
        )
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(
        f"outside the two old timings: {outside} of {len(ratios)}; new/old geometric mean "
        f"{mean:.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
