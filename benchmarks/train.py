"""Training throughput of the presets: self-play moves/s and learner updates/s.

    python -m benchmarks.train [--presets tic_tac_toe connect_four] [--repeats 5] [--json PATH]
    python -m benchmarks.train --presets othello --resnet 16x1 32x4

`--resnet CHANNELSxBLOCKS` times each preset again with an `AlphaZeroResNet` of that size
in place of its network, once with `lax.conv` and once with the convolutions as matrix
products (`conv_as_matmul`), in the same process.

Self-play and learning are timed separately (`AlphaZero.self_play` and `AlphaZero.learn`,
each jitted), compile time apart from steady state (median of `--repeats` calls after a
warm-up). The learner is timed on a buffer filled by self-play, so its updates are real.
"""

import argparse
import dataclasses
import itertools
import json
import statistics
import time

import equinox as eqx
import jax

import azx


def _timed(function, *args):
    start = time.perf_counter()
    out = jax.block_until_ready(function(*args))
    return out, time.perf_counter() - start


def measure(name: str, repeats: int, resnet: tuple[int, int, bool] | None = None) -> dict:
    preset = azx.presets.get(name)
    network = preset.network
    if resnet is not None:
        channels, blocks, as_matmul = resnet
        options = {"channels": channels, "num_blocks": blocks, "conv_as_matmul": as_matmul}
        preset = dataclasses.replace(preset, network="resnet", network_options=options)
        network = f"resnet {channels}x{blocks} {'matmul' if as_matmul else 'lax.conv'}"
    return measure_preset(preset, repeats, network=network)


def setting(preset: azx.presets.Preset, network: str) -> dict:
    """What `measure_preset` measures: the preset's game, network, search and sizes."""
    config = preset.config
    return {
        "preset": preset.name,
        "env": preset.env,
        "network": network,
        "search": preset.recipe.search,
        "num_simulations": preset.recipe.search_options["num_simulations"],
        "num_envs": config.num_envs,
        "collect_steps": config.collect_steps,
        "train_steps": config.train_steps,
        "batch_size": config.batch_size,
    }


def measure_preset(preset: azx.presets.Preset, repeats: int, *, network: str) -> dict:
    """Self-play and learning of an AlphaZero `preset` timed apart: compile seconds, then
    the median of `repeats` calls of each (`network` names its network in the record)."""
    trainer, state = preset.build(seed=0)
    config = trainer.config
    self_play = eqx.filter_jit(trainer.self_play)
    learn = eqx.filter_jit(trainer.learn)
    # Keys beyond the first ones for games that take many calls to end (go: 162 moves).
    keys = itertools.chain(
        jax.random.split(jax.random.key(0), 4 * repeats + 16),
        (jax.random.fold_in(jax.random.key(1), index) for index in itertools.count()),
    )

    state, play_compile = _timed(self_play, state, next(keys))
    # Fill the buffer until finished games give the learner real data.
    while int(trainer.buffer.num_valid(state.buffer)) < config.batch_size:
        state, _ = _timed(self_play, state, next(keys))
    state, learn_compile = _timed(learn, state, next(keys))

    play_times, learn_times = [], []
    for _ in range(repeats):
        state, seconds = _timed(self_play, state, next(keys))
        play_times.append(seconds)
        state, seconds = _timed(learn, state, next(keys))
        learn_times.append(seconds)
    play_s, learn_s = statistics.median(play_times), statistics.median(learn_times)
    moves = config.num_envs * config.collect_steps
    return setting(preset, network) | {
        "selfplay_moves_per_s": moves / play_s,
        "learner_updates_per_s": config.train_steps / learn_s,
        "selfplay_s": play_s,
        "learn_s": learn_s,
        "step_s": play_s + learn_s,
        "selfplay_compile_s": play_compile,
        "learn_compile_s": learn_compile,
        "backend": jax.default_backend(),
    }


def table(records: list[dict]) -> str:
    lines = [
        "| preset | network | search | envs | self-play moves/s | learner updates/s "
        "| s/step | compile self-play s | compile learn s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['preset']} | {r['network']} | {r['search']} {r['num_simulations']} "
            f"| {r['num_envs']} | {r['selfplay_moves_per_s']:.0f} "
            f"| {r['learner_updates_per_s']:.1f} | {r['step_s']:.3f} "
            f"| {r['selfplay_compile_s']:.1f} | {r['learn_compile_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["tic_tac_toe", "connect_four"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the records to this JSON file")
    parser.add_argument(
        "--resnet",
        nargs="+",
        default=[],
        metavar="CxB",
        help="instead of the presets' networks, AlphaZeroResNets of C channels and B blocks",
    )
    args = parser.parse_args(argv)
    sizes = []
    for spec in args.resnet:
        channels, _, blocks = spec.partition("x")
        if not (channels.isdigit() and blocks.isdigit()):
            parser.error(f"--resnet takes CHANNELSxBLOCKS such as 16x1, got {spec!r}")
        sizes.append((int(channels), int(blocks)))
    variants = [(c, b, m) for c, b in sizes for m in (False, True)] or [None]
    records = []
    for name in args.presets:
        for variant in variants:
            records.append(measure(name, args.repeats, variant))
            print(f"measured {name} {records[-1]['network']}", flush=True)
    print(table(records))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(records, file, indent=2)


if __name__ == "__main__":
    main()
