"""Several seeds as one vmapped program against the same seeds trained one after another.

    python -m benchmarks.seeds ppo_cartpole --seeds 8
    python -m benchmarks.seeds tic_tac_toe --seeds 4 [--iterations 20]

Both ways train every seed for the preset's full run in one jitted call of
`trainer.train` (the vmapped one through `Preset.build_seeds` and `eqx.filter_vmap`);
compile times are reported apart from training times. Then each seed of each way is
checked: a PPO seed's mean return over `--episodes` sampled episodes, a tic-tac-toe
seed's network against every decisive position (`benchmarks.tictactoe_exact`). Prints one
line per seed and the wall-time ratio of the separate runs to the vmapped one.
"""

import argparse
import time

import equinox as eqx
import jax

import azx


def _timed(function, *args):
    started = time.perf_counter()
    result = jax.block_until_ready(function(*args))
    return result, time.perf_counter() - started


def _check(preset, trainer, state, episodes: int) -> str:
    if isinstance(preset.recipe, azx.presets.PPORecipe):
        record = azx.run.evaluate_policy(
            trainer, state, num_episodes=episodes, key=jax.random.key(0), greedy=False
        )
        low, high = record["return_low"], record["return_high"]
        return f"return {record['return_mean']:.1f} [{low:.1f}, {high:.1f}]"
    from benchmarks.tictactoe_exact import check_network

    result = check_network(state.net, trainer.env)
    return f"optimal in {result.num_optimal} of {result.num_positions} decisive positions"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--iterations", type=int, help="default: the preset's")
    args = parser.parse_args(argv)
    preset = azx.presets.get(args.preset)
    seeds = list(range(args.seeds))
    iterations = args.iterations or preset.iterations

    trainer, states = preset.build_seeds(seeds)
    vmapped = eqx.filter_jit(eqx.filter_vmap(trainer.train))
    compiled, compile_vmapped = _timed(lambda: vmapped.lower(states, iterations).compile())
    trained, together = _timed(compiled, states, iterations)
    print(f"{len(seeds)} seeds vmapped: compile {compile_vmapped:.1f} s, train {together:.1f} s")

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
        alone = _check(preset, alone_trainer, state, args.episodes)
        batched = _check(preset, trainer, azx.presets.take_seed(trained, index), args.episodes)
        print(f"seed {seed}: alone {alone} ({seconds:.1f} s); vmapped {batched}")
    print(
        f"{len(seeds)} separate runs: compile {compile_single:.1f} s (once), train "
        f"{separate:.1f} s; separate / vmapped training time: {separate / together:.2f} "
        f"on {jax.devices()[0].device_kind}"
    )


if __name__ == "__main__":
    main()
