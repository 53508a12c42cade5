"""Paired training runs: how strong does a preset get, with and without a change?

    python -m benchmarks.strength connect_four --seeds 0 1 --iterations 1500 \
        --set fast_search_simulations=8 --opponent mcts:200 --games 200

Trains the preset (with `--set FIELD=VALUE` changes, as in benchmarks.tictactoe_exact;
`--iterations` also sets `decay_iterations` when the preset decays, so the learning-rate
schedule ends with the run) for each seed, in jitted calls of `--chunk` iterations, then
plays the search agent (the preset's evaluation search) and the network alone against
each opponent. It prints one line per seed and match, with the training time (compile
included), and appends the records to `--out` as JSON lines. No evaluation runs during
training, so the time is the training's alone.
"""

import argparse
import json
import time

import equinox as eqx
import jax

from azx import arena
from azx.run import evaluate

from ._settings import add_set_option, preset_with


def train(preset, seed: int, chunk: int):
    trainer, state = preset.build(seed=seed)
    train_chunk = eqx.filter_jit(trainer.train)
    start = time.perf_counter()
    done = 0
    while done < preset.iterations:
        steps = min(chunk, preset.iterations - done)
        state = jax.block_until_ready(train_chunk(state, steps))
        done += steps
    return trainer, state, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int)
    add_set_option(parser)
    parser.add_argument("--opponent", action="append", default=[])
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="strength.jsonl")
    args = parser.parse_args()

    settings = list(args.set)
    if args.iterations is not None:
        settings.append(f"iterations={args.iterations}")
        if azx_decays(args.preset):
            settings.append(f"decay_iterations={args.iterations}")
    preset = preset_with(args.preset, settings)
    opponents = args.opponent or list(preset.recipe.eval_opponents)
    for seed in args.seeds:
        trainer, state, seconds = train(preset, seed, args.chunk)
        agents = {
            "search": arena.SearchAgent(state.net, preset.recipe.make_eval_search()),
            "network": arena.NetworkAgent(state.net),
        }
        results = evaluate(
            trainer.env, agents, opponents, num_games=args.games, key=jax.random.key(seed)
        )
        for agent, by_opponent in results.items():
            for opponent, record in by_opponent.items():
                print(
                    f"{args.label or ' '.join(args.set) or 'preset'} seed {seed} "
                    f"({preset.iterations} it, {seconds:.0f} s): {agent} vs {opponent}: "
                    f"{record['wins']}/{record['draws']}/{record['losses']} "
                    f"score {record['score']:.3f}",
                    flush=True,
                )
        with open(args.out, "a") as file:
            record = {
                "preset": args.preset,
                "label": args.label,
                "settings": settings,
                "seed": seed,
                "iterations": preset.iterations,
                "train_seconds": seconds,
                "results": results,
            }
            file.write(json.dumps(record) + "\n")


def azx_decays(name: str) -> bool:
    return preset_with(name, []).config.decay_iterations is not None


if __name__ == "__main__":
    main()
