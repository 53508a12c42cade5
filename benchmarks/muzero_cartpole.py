"""The `muzero_cartpole` preset trained seed by seed: the self-play return against
environment steps, and evaluations by the search over the learned model with its noise off
([`azx.muzero.evaluate`][]).

    python -m benchmarks.muzero_cartpole --seeds 0 1 2 3 4
    python -m benchmarks.muzero_cartpole --seeds 1 4 --config '{"td_steps": 10}'
    python -m benchmarks.muzero_cartpole --seeds 0 1 2 --vmap --set td_steps=20

`--set FIELD=VALUE` changes the preset as in `benchmarks.muzero_games`; `--vmap` trains the
seeds all at once in one program (as `azx train --seeds` does on an accelerator, where one
seed leaves the card idle); each seed's numbers are then its own run's within float
tolerance, not bit for bit.

Prints, per seed, one line per `--report-every` iterations (environment steps, mean return
of the self-play episodes that ended since the last line, losses, seconds of training so
far) and one line per evaluation (every `--eval-every` iterations and at the end: mean,
minimum and 95% interval of the return over `--eval-episodes` episodes), and with
`--sampled` a second line for the search with its self-play noise on.
"""

import argparse
import dataclasses
import json
import time

import equinox as eqx
import jax
import numpy as np

import azx
from benchmarks._settings import add_set_option, preset_with


def main(argv=None, preset_name: str = "muzero_cartpole", description: str = __doc__):
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--preset", default=preset_name, help=f"default: {preset_name}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, default=None, help="default: the preset's")
    parser.add_argument("--report-every", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument(
        "--config", type=json.loads, default={}, help="JSON: changes to the preset's config"
    )
    parser.add_argument(
        "--search-options", type=json.loads, default=None, help="JSON: the search's options"
    )
    add_set_option(parser)
    parser.add_argument(
        "--vmap", action="store_true", help="train the seeds at once under vmap, in one program"
    )
    parser.add_argument(
        "--sampled",
        action="store_true",
        help="also evaluate with the search as self-play runs it, its noise on",
    )
    args = parser.parse_args(argv)
    preset = preset_with(args.preset, args.set)
    if not isinstance(preset.recipe, azx.presets.MuZeroRecipe):
        parser.error(f"{args.preset} is not a MuZero preset")
    preset = preset.replace(config=dataclasses.replace(preset.config, **args.config))
    if args.search_options is not None:
        preset = preset.replace(search_options=args.search_options)
    iterations = args.iterations or preset.iterations
    evaluate = eqx.filter_jit(azx.muzero.evaluate)
    for seeds, trainer, state, train in _runs(preset, args.seeds, vmap=args.vmap):
        for state, metrics, done, training_seconds in train_in_chunks(
            train, state, iterations, args.report_every
        ):
            for index, seed in enumerate(seeds):
                one_state, one_metrics = state, metrics
                if args.vmap:
                    one_state = azx.presets.take_seed(state, index)
                    one_metrics = azx.presets.take_seed(metrics, index)
                _report(trainer, seed, one_state, one_metrics, training_seconds)
                if done % args.eval_every == 0 or done == iterations:
                    _evaluate(args, evaluate, trainer, seed, one_state)


def _runs(preset, seeds, *, vmap: bool):
    """`(seeds, trainer, state, train_and_record)` for each program to train: one for all
    `seeds` stacked under `vmap`, otherwise one per seed, built as its turn comes."""
    if vmap:
        trainer, states = preset.build_seeds(seeds, vmap=True)
        yield seeds, trainer, states, azx.parallel.over_seeds(trainer.train_and_record)
        return
    for seed in seeds:
        trainer, state = preset.build(seed=seed)
        yield [seed], trainer, state, trainer.train_and_record


def _report(trainer, seed, state, metrics, training_seconds):
    episodes = np.asarray(metrics.episodes)
    returns = np.asarray(metrics.episode_return) * episodes
    mean_return = returns.sum() / max(episodes.sum(), 1)
    losses = {
        name: float(np.mean(getattr(metrics, name)))
        for name in ("loss", "value_loss", "reward_loss")
    }
    print(
        f"seed {seed} env_steps {trainer.env_steps(state)} self-play return "
        f"{mean_return:.1f} ({episodes.sum()} episodes) loss {losses['loss']:.3f} "
        f"value {losses['value_loss']:.3f} reward {losses['reward_loss']:.3f} "
        f"training {training_seconds:.0f} s",
        flush=True,
    )


def _evaluate(args, evaluate, trainer, seed, state):
    for greedy in (True, False) if args.sampled else (True,):
        result = evaluate(
            trainer,
            state.net,
            num_episodes=args.eval_episodes,
            key=jax.random.key(10_000 + seed),
            greedy=greedy,
        )
        low, high = result.return_interval()
        returns = np.asarray(result.returns)
        print(
            f"seed {seed} env_steps {trainer.env_steps(state)} "
            f"{'evaluation' if greedy else 'sampled evaluation'}: mean "
            f"return {returns.mean():.1f} [{low:.1f}, {high:.1f}] min "
            f"{returns.min():.0f} over {returns.size} episodes",
            flush=True,
        )


def train_in_chunks(train_and_record, state, iterations: int, every: int):
    """`train_and_record` (a trainer's, or over seeds) over `iterations` in calls of at
    most `every`, yielding after each call `(state, metrics, iterations done, seconds of
    training so far)`; the seconds count the calls alone (the first one's compilation
    included)."""
    train = eqx.filter_jit(train_and_record)
    seconds, done = 0.0, 0
    while done < iterations:
        chunk = min(every, iterations - done)
        start = time.perf_counter()
        state, metrics = train(state, chunk)
        jax.block_until_ready(state.params)
        seconds += time.perf_counter() - start
        done += chunk
        yield state, metrics, done, seconds


if __name__ == "__main__":
    main()
