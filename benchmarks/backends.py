"""The native search's backends against its default, in one process on identical inputs.

    python -m benchmarks.backends [--envs connect_four go_9x9] [--batch 256 ...]
                                  [--backends default unrolled ...] [--repeats 7]

For each game and batch, both algorithms (PUCT and Gumbel, 64 simulations, the benchmark
MLP) run on the default backend (`PlatformBackend`: row kernels on XLA:CPU in games with
few actions, lockstep elsewhere), on `LockstepBackend`, and on `UnrolledBackend` at its
default sizes, at twice them, with the descent unrolled alone (`unrolled-4-4`: the
lockstep backup's chunk) and with the backup's chunks alone (`unrolled-1-16`); every
search gives the same arrays (tests and `benchmarks.search_identity --backend`), so only
the time differs. They are timed in turns (`benchmarks.search.timed`); printed, line by
line: each one's median ms per call and its time over the default's.
"""

import argparse
import dataclasses
import sys

import equinox as eqx
import jax

import azx
from azx.search import LockstepBackend, UnrolledBackend

from . import search


SIMULATIONS = 64
BACKENDS = {
    "default": None,
    "lockstep": LockstepBackend(),
    "unrolled": UnrolledBackend(),
    "unrolled-8-32": UnrolledBackend(levels=8, backup_chunk=32),
    "unrolled-4-4": UnrolledBackend(levels=4, backup_chunk=4),
    "unrolled-1-16": UnrolledBackend(levels=1, backup_chunk=16),
}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=["connect_four", "go_9x9"])
    parser.add_argument("--batch", type=int, nargs="+", default=[256])
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"# native search backends on {jax.devices()[0].device_kind}", file=sys.stderr)
    names = ["default", *(name for name in args.backends if name != "default")]
    lines = ["| env | algo | batch | backend | ms per call | time / default | compile s |"]
    lines.append("|" + "---|" * 7)
    print("\n".join(lines), flush=True)
    results = {}
    for env_name in args.envs:
        env = azx.envs.make(env_name)
        net = search.make_net("mlp", env, jax.random.key(1))
        params, static = eqx.partition(net, eqx.is_array)
        for batch in args.batch:
            states = search.root_states(env, batch, 6, jax.random.key(2))
            fns = {}
            for algo in search.ALGOS:
                default = search.make_search(algo, "native", SIMULATIONS)
                for name in names:
                    backend = BACKENDS[name]
                    searcher = default if backend is None else (
                        dataclasses.replace(default, backend=backend)
                    )  # fmt: skip
                    fns[algo, name] = search.search_fn(searcher, static, env)
            timed = search.timed(fns, (params, states, jax.random.key(0)), args.repeats)
            for (algo, name), (compile_s, ms) in timed.items():
                ratio = ms / timed[algo, "default"][1]
                results[env_name, algo, batch, name] = ms
                line = (
                    f"| {env_name} | {algo} | {batch} | {name} | {ms:.2f} | {ratio:.2f}x "
                    f"| {compile_s:.1f} |"
                )
                lines.append(line)
                print(line, flush=True)
            jax.clear_caches()
    return results


if __name__ == "__main__":
    main()
