"""2048's presets and their variants, trained and compared at equal environment steps.

Chance nodes against the same search sampling one outcome per expansion, and Stochastic
MuZero against MuZero and against AlphaZero with the true chance model:

    python -m benchmarks.chance_2048 train --variant chance --seed 0 --out runs/2048-chance-0
    python -m benchmarks.chance_2048 train --variant sampled --seed 0 --out runs/2048-sampled-0
    python -m benchmarks.chance_2048 train --variant stochastic_muzero --seed 0 \
        --out runs/2048-stochastic_muzero-0
    python -m benchmarks.chance_2048 train --variant muzero --seed 0 --out runs/2048-muzero-0
    python -m benchmarks.chance_2048 compare runs/2048-chance-0 runs/2048-stochastic_muzero-0 \
        runs/2048-muzero-0 [--plot curves.png]

`chance` (or `alphazero`) is the `2048` preset: AlphaZero, whose search averages over the
true new-tile distribution at chance nodes; `sampled` is the same preset with
`chance_nodes=False` in its search (the tree treats one sampled new tile as the move's
consequence). `stochastic_muzero` is the `stochastic_muzero_2048` preset, which learns
the afterstates and the chance codes; `muzero` is that preset with MuZero's recipe and
network (`muzero_2048`): the same sizes, search and schedule over a deterministic learned
model, which has no chance codes and so no `num_codes`, `chance_loss_weight` or
`commitment_loss_weight`. All play 32 games x 64 moves an iteration, so their iterations
are equal environment steps.

`train` writes a run as `azx train` does (`azx.run.train`: an evaluation of 32 episodes
every 100 iterations in `metrics.jsonl`); `compare` prints each run's evaluation return
(mean and 95% interval, in the presets' units of 100 points) at every evaluated
iteration, and with `--plot` draws the curves on one figure. `azx eval --run DIR --games
N` plays the same episodes' keys for every run.
"""

import argparse
import pathlib

import azx


def sampled_preset() -> azx.presets.Preset:
    """The `2048` preset with its search sampling one outcome per expansion."""
    preset = azx.presets.get("2048")
    options = preset.recipe.search_options | {"chance_nodes": False}
    return preset.replace(
        name="2048_sampled",
        search_options=options,
        description=preset.description.replace("with chance nodes", "sampling outcomes"),
    )


def muzero_preset() -> azx.presets.Preset:
    """The `stochastic_muzero_2048` preset with MuZero's recipe: its sizes, search and
    schedule over a deterministic learned model (no chance codes or their losses)."""
    data = azx.presets.get("stochastic_muzero_2048").to_dict()
    del data["chance_loss_weight"], data["commitment_loss_weight"]
    del data["network_options"]["num_codes"]
    data |= {
        "algorithm": "muzero",
        "name": "muzero_2048",
        "description": "2048, MuZero (MLP model, Gumbel 16 simulations)",
    }
    return azx.presets.from_dict(data)


VARIANTS = {
    "chance": lambda: azx.presets.get("2048"),
    "alphazero": lambda: azx.presets.get("2048"),
    "sampled": sampled_preset,
    "stochastic_muzero": lambda: azx.presets.get("stochastic_muzero_2048"),
    "muzero": muzero_preset,
}


def evaluations(run: str) -> list[tuple[int, int, dict]]:
    """A run's evaluations in `metrics.jsonl`: (iteration, environment steps, record of
    its first agent) for each record that has one."""
    return [
        (record["iteration"], record["env_steps"], next(iter(record["eval"].values())))
        for record in azx.run.read_metrics(run)
        if "eval" in record
    ]


def compare(runs: list[str], plot: str | None) -> None:
    """Print the runs' evaluation returns side by side, by environment steps."""
    table = {run: {steps: (it, ev) for it, steps, ev in evaluations(run)} for run in runs}
    names = [pathlib.Path(run).name for run in runs]
    print("| iteration | env steps | " + " | ".join(names) + " |")
    print("|---" * (2 + len(runs)) + "|")
    for steps in sorted({steps for rows in table.values() for steps in rows}):
        iteration = next(rows[steps][0] for rows in table.values() if steps in rows)
        cells = [
            f"{ev['return_mean']:.1f} [{ev['return_low']:.1f}, {ev['return_high']:.1f}]"
            if (ev := rows.get(steps, (None, None))[1])
            else "-"
            for rows in table.values()
        ]
        print(f"| {iteration} | {steps:,} | " + " | ".join(cells) + " |")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(7, 4.5))
        for name, rows in zip(names, table.values(), strict=True):
            steps = sorted(rows)
            mean, low, high = (
                [rows[s][1][f"return_{k}"] for s in steps] for k in ("mean", "low", "high")
            )
            axes.plot(steps, mean, marker="o", label=name)
            axes.fill_between(steps, low, high, alpha=0.2)
        axes.set(xlabel="environment steps", ylabel="evaluation return (x100 points)")
        axes.set_title("2048: evaluation return, mean and 95% interval over 32 episodes")
        axes.legend()
        figure.tight_layout()
        figure.savefig(plot, dpi=120)
        print(f"wrote {plot}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train one variant's preset (azx.run.train)")
    train.add_argument("--variant", choices=list(VARIANTS), required=True)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", required=True)
    train.add_argument("--iterations", type=int)
    table = commands.add_parser("compare", help="the runs' evaluation returns side by side")
    table.add_argument("runs", nargs="+", help="run directories")
    table.add_argument("--plot", help="a PNG path: the curves on one figure")
    args = parser.parse_args(argv)
    if args.command == "compare":
        compare(args.runs, args.plot)
        return
    preset = VARIANTS[args.variant]()
    if preset.name not in azx.presets.names():
        azx.presets.register(preset)
    azx.run.train(args.out, preset=preset.name, seed=args.seed, iterations=args.iterations)


if __name__ == "__main__":
    main()
