"""Does PPO learn? Several seeds of a PPO preset, each trained for its full run and then
evaluated.

    python -m benchmarks.ppo_learning ppo_cartpole --seeds 8 [--json PATH]
    python -m benchmarks.ppo_learning ppo_minigrid --seeds 5
    python -m benchmarks.ppo_learning ppo_pendulum --seeds 5 --threshold -250
    python -m benchmarks.ppo_learning ppo_breakout --seeds 3 --iterations 50
    python -m benchmarks.ppo_learning ppo_breakout --seeds 3 --set env='"gymnax:Freeway-MinAtar"' \
        --set iterations=10 --set anneal_iterations=10
    python -m benchmarks.ppo_learning ppo_minigrid_seed002 --seeds 10 --threshold 0.8 \
        --network-options '{"action_embedding_init": "standard_normal"}'

Every seed trains through `Preset.build` and `PPO.train_and_record` (the code of
`azx train`), in calls of `--chunk` iterations, then plays `--episodes` evaluation episodes
(sampling the policy, or its most likely action with `--greedy`). Prints each seed's mean
evaluation return with its 95% interval and the time taken; `--threshold` counts the
seeds whose mean return reaches it; `--network-options` (a JSON object) overrides some of
the preset's network options, for an A/B of one of them; `--set FIELD=VALUE` changes the
preset as in `benchmarks.muzero_games` (another environment, a field of its config).
`last_training_return` in the JSON records is the mean return of the episodes that ended
in the last iteration that had any (`null` if none ended in the whole run).
"""

import argparse
import json
import time

import equinox as eqx
import jax
import numpy as np

import azx
from benchmarks._settings import add_set_option, preset_with


def train_and_evaluate(preset, seed: int, chunk: int, episodes: int, greedy: bool) -> dict:
    trainer, state = preset.build(seed=seed)
    # One jitted function for all seeds: equal configurations give equal trainers, so
    # every seed after the first reuses its compilation.
    started = time.perf_counter()
    done = 0
    last_return = None  # of the most recent iteration in which episodes ended
    while done < preset.iterations:
        n = min(chunk, preset.iterations - done)
        state, history = _train(trainer, state, n)
        ended = np.flatnonzero(np.asarray(history.episodes))
        if ended.size:
            last_return = float(history.episode_return[ended[-1]])
        done += n
    state = jax.block_until_ready(state)
    seconds = time.perf_counter() - started
    result = evaluate(preset, trainer, state, episodes, jax.random.key(10_000 + seed), greedy)
    record = evaluation_record(seed, trainer, state, seconds, result)
    return record | {"last_training_return": last_return}


_ppo_evaluate = eqx.filter_jit(azx.ppo.evaluate)


def evaluate(preset, trainer, state, episodes: int, key, greedy: bool):
    """The trained policy's episodes as `azx eval` plays them (its observation statistics
    where the preset normalises observations)."""
    stats = state.observation_stats if preset.config.normalize_observations else None
    return _ppo_evaluate(
        trainer.env, state.net, num_episodes=episodes, key=key, greedy=greedy,
        observation_stats=stats, action_distribution=preset.config.action_distribution,
    )  # fmt: skip


def evaluation_record(seed: int, trainer, state, seconds: float, result) -> dict:
    """One seed's trained run and its evaluation (an `EvaluationResult`) as a JSON record."""
    low, high = result.return_interval()
    return {
        "seed": seed,
        "env_steps": trainer.env_steps(state),
        "train_s": seconds,
        "return_mean": result.mean_return(),
        "return_low": low,
        "return_high": high,
        "return_min": float(result.returns.min()),
        "return_max": float(result.returns.max()),
        "unfinished": int((~result.finished).sum()),
    }


@eqx.filter_jit
def _train(trainer, state, num_steps):
    return trainer.train_and_record(state, num_steps)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="a PPO preset, e.g. ppo_cartpole")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--chunk", type=int, default=100, help="iterations per jitted call")
    parser.add_argument(
        "--iterations",
        type=int,
        help="stop after this many iterations (default: the preset's); the learning-rate "
        "schedule stays the preset's, so this reads the preset's run part of the way",
    )
    parser.add_argument("--threshold", type=float, help="count seeds reaching this return")
    parser.add_argument("--json", help="write the records to this JSON file")
    parser.add_argument(
        "--network-options",
        type=json.loads,
        default={},
        help="network options that replace the preset's, as JSON: '{\"hidden_size\": 32}'",
    )
    add_set_option(parser)
    args = parser.parse_args(argv)
    preset = preset_with(args.preset, args.set)
    if not isinstance(preset.recipe, azx.presets.PPORecipe):
        parser.error(f"{args.preset} is not a PPO preset")
    if not isinstance(args.network_options, dict):
        parser.error(f"--network-options must be a JSON object, got {args.network_options!r}")
    if args.network_options:
        preset = preset.replace(network_options=preset.network_options | args.network_options)
    if args.iterations is not None:
        preset = preset.replace(iterations=args.iterations)
    records = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        record = train_and_evaluate(preset, seed, args.chunk, args.episodes, args.greedy)
        records.append(record)
        print(
            f"seed {seed}: return {record['return_mean']:.3f} "
            f"[{record['return_low']:.3f}, {record['return_high']:.3f}] over {args.episodes} "
            f"episodes after {record['env_steps']} steps ({record['train_s']:.0f} s)",
            flush=True,
        )
    if args.threshold is not None:
        reached = sum(r["return_mean"] >= args.threshold for r in records)
        print(f"{reached} of {len(records)} seeds reach a mean return of {args.threshold}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"preset": preset.to_dict(), "records": records}, file, indent=2)


if __name__ == "__main__":
    main()
