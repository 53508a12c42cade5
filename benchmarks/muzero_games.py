"""A MuZero preset for a two-player game (`muzero_tic_tac_toe`) trained seed by seed, and
evaluated as `azx train` evaluates it: its agents (the search over the learned model,
noise off, and the network alone) in matches of the preset's `eval_games` against its
opponents (the random player and the exact solver for tic-tac-toe).

    python -m benchmarks.muzero_games --seeds 0 1 2 --every 400
    python -m benchmarks.muzero_games --seeds 0 --config '{"unroll_steps": 9}'

Prints, per seed and every `--every` iterations, the training time so far, the last
iteration's loss and value loss, and each agent's won / drawn / lost against each
opponent (evaluation key `10_000 + seed`).
"""

import argparse
import dataclasses
import json
import time

import equinox as eqx
import jax
import numpy as np

import azx


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="muzero_tic_tac_toe")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, default=None, help="default: the preset's")
    parser.add_argument("--every", type=int, default=400)
    parser.add_argument(
        "--config", type=json.loads, default={}, help="JSON: changes to the preset's config"
    )
    args = parser.parse_args(argv)
    preset = azx.presets.get(args.preset)
    preset = preset.replace(config=dataclasses.replace(preset.config, **args.config))
    iterations = args.iterations or preset.iterations
    for seed in args.seeds:
        trainer, state = preset.build(seed=seed)
        train = eqx.filter_jit(trainer.train_and_record)
        seconds, done = 0.0, 0
        while done < iterations:
            chunk = min(args.every, iterations - done)
            start = time.perf_counter()
            state, metrics = train(state, chunk)
            jax.block_until_ready(state.params)
            seconds += time.perf_counter() - start
            done += chunk
            results = preset.recipe.evaluate(
                trainer, state, key=jax.random.key(10_000 + seed), phase=lambda _: None
            )
            scores = ", ".join(
                f"{agent} vs {spec} {r['wins']}/{r['draws']}/{r['losses']}"
                for agent, by_opponent in results.items()
                for spec, r in by_opponent.items()
            )
            loss, value = (float(np.asarray(x)[-1]) for x in (metrics.loss, metrics.value_loss))
            print(
                f"seed {seed} iteration {done}: {seconds:.0f} s, loss {loss:.3f} (value "
                f"{value:.3f}); {scores}",
                flush=True,
            )


if __name__ == "__main__":
    main()
