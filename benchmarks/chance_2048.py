"""2048 with chance nodes against the same search sampling one outcome per expansion:
paired runs (the same seeds, the same preset otherwise, so the same compute).

    python -m benchmarks.chance_2048 train --variant chance --seed 0 --out runs/2048-chance-0
    python -m benchmarks.chance_2048 train --variant sampled --seed 0 --out runs/2048-sampled-0

`chance` is the `2048` preset; `sampled` is the same preset with `chance_nodes=False`
in its search (today's behaviour before chance nodes: the tree treats one sampled new tile
as the move's consequence). Compare the runs with `azx eval --run DIR --games N`, which
plays the same episodes' keys for both.
"""

import argparse

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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--variant", choices=["chance", "sampled"], required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--iterations", type=int)
    args = parser.parse_args(argv)
    name = "2048"
    if args.variant == "sampled":
        azx.presets.register(sampled_preset())
        name = "2048_sampled"
    azx.run.train(args.out, preset=name, seed=args.seed, iterations=args.iterations)


if __name__ == "__main__":
    main()
