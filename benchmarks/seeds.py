"""Several seeds as one program against the same seeds trained in separate calls.

    python -m benchmarks.seeds ppo_cartpole --seeds 8
    python -m benchmarks.seeds tic_tac_toe --seeds 4 [--iterations 20] [--vmap | --no-vmap]

The seeds train for the preset's full run in one jitted call of `trainer.train` over the
stacked states (`Preset.build_seeds` and `azx.parallel.over_seeds`: all at once under
`vmap`, or one after another, by default as `azx train --seeds` does on this platform,
`Preset.vmaps_seeds`), then each seed alone in its own call of the single-seed program;
compile times are reported apart from training times. Then each seed of each way is
checked: a PPO seed's mean return over `--episodes` sampled episodes, a tic-tac-toe
seed's network against every decisive position (`benchmarks.tictactoe_exact`), and
whether its trained state equals its own run's bit for bit. Prints one line per seed and
the wall-time ratio of the separate runs to the one program.
"""

import argparse
import time

import equinox as eqx
import jax
import numpy as np

import azx


def _timed(function, *args):
    started = time.perf_counter()
    result = jax.block_until_ready(function(*args))
    return result, time.perf_counter() - started


def _check(preset, trainer, state, episodes: int) -> str:
    if isinstance(preset.recipe, azx.presets.PPORecipe):
        record = azx.run.evaluate_policy(
            preset.recipe,
            trainer,
            state,
            num_episodes=episodes,
            key=jax.random.key(0),
            greedy=False,
        )
        low, high = record["return_low"], record["return_high"]
        return f"return {record['return_mean']:.1f} [{low:.1f}, {high:.1f}]"
    from benchmarks.tictactoe_exact import check_network

    result = check_network(state.net, trainer.env)
    return f"optimal in {result.num_optimal} of {result.num_positions} decisive positions"


def _same_bits(first, second) -> bool:
    """Whether two states' arrays are equal bit for bit (keys by their data)."""

    def data(leaf):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        return np.asarray(leaf)

    pairs = zip(*(jax.tree.leaves(eqx.filter(s, eqx.is_array)) for s in (first, second)))
    return all(np.array_equal(data(a), data(b)) for a, b in pairs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--iterations", type=int, help="default: the preset's")
    parser.add_argument(
        "--vmap",
        action=argparse.BooleanOptionalAction,
        help="seeds all at once (--vmap) or one after another (--no-vmap); default: the "
        "preset's choice on this platform",
    )
    args = parser.parse_args(argv)
    preset = azx.presets.get(args.preset)
    seeds = list(range(args.seeds))
    iterations = args.iterations or preset.iterations
    vmap = preset.vmaps_seeds() if args.vmap is None else args.vmap
    way = "vmapped" if vmap else "one after another in one program"

    trainer, states = preset.build_seeds(seeds, vmap=vmap)
    together_fn = eqx.filter_jit(azx.parallel.over_seeds(trainer.train, vmap=vmap))
    compiled, compile_together = _timed(lambda: together_fn.lower(states, iterations).compile())
    trained, together = _timed(compiled, states, iterations)
    print(f"{len(seeds)} seeds {way}: compile {compile_together:.1f} s, train {together:.1f} s")

    # Each seed alone as `azx train --seed S` runs it (AlphaZero's search on the kernels
    # the platform picks, not the lockstep ones `build_seeds` picks for vmap).
    alone_trainer, first = preset.build(seed=seeds[0])
    single = eqx.filter_jit(alone_trainer.train)
    compiled_single, compile_single = _timed(lambda: single.lower(first, iterations).compile())
    separate = 0.0
    for index, seed in enumerate(seeds):
        _, state = preset.build(seed=seed)
        state, seconds = _timed(compiled_single, state, iterations)
        separate += seconds
        mine = azx.presets.take_seed(trained, index)
        alone = _check(preset, alone_trainer, state, args.episodes)
        batched = _check(preset, trainer, mine, args.episodes)
        same = "bit for bit its own run" if _same_bits(state, mine) else "not bit for bit"
        print(f"seed {seed}: alone {alone} ({seconds:.1f} s); together {batched} ({same})")
    print(
        f"{len(seeds)} separate runs: compile {compile_single:.1f} s (once), train "
        f"{separate:.1f} s; separate / together training time: {separate / together:.2f} "
        f"on {jax.devices()[0].device_kind}"
    )


if __name__ == "__main__":
    main()
