"""Memory of the AlphaZero presets: what one game row, one simulation and one stored
position cost, and the largest `num_envs` that fits a given accelerator memory.

    python -m benchmarks.memory [--presets tic_tac_toe connect_four] [--json PATH]

Sizes of the state come from its real array shapes (`jax.eval_shape` of `trainer.init`,
nothing allocated). The temporaries of a training step come from XLA's own accounting of
the compiled `step` (`memory_analysis()`), compiled at `num_envs` and at twice that, with
`batch_size` and `buffer_capacity` scaled alike, so that the difference is the cost of the
added rows. `step` is compiled without donating its input state, as the library's
training loop jits it, so input and output states are both alive; the last table assumes
a caller that donates it instead. Markdown tables go to stdout; `--json` writes the
records. About two minutes on the 2-core development CPU, most of it compiling.
"""

import argparse
import dataclasses
import json
import math
import sys
import time

import equinox as eqx
import jax
import numpy as np

import azx


#: Accelerator memories (GiB) for the table of the largest `num_envs` that fits.
MEMORIES_GIB = (16, 40, 80)
#: Simulation counts at which the tree is sized, to get its cost per simulation.
TREE_SIMULATIONS = (32, 64)
GIB = 2**30


def nbytes(tree) -> int:
    """Bytes of every array leaf of `tree` (arrays or `jax.ShapeDtypeStruct`s). A typed
    PRNG key counts as its raw data (two uint32 words for threefry)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        if not hasattr(leaf, "dtype"):
            continue
        size = math.prod(leaf.shape)
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            total += size * 8
        else:
            total += size * np.dtype(leaf.dtype).itemsize
    return total


def scaled(preset: azx.presets.Preset, factor: int) -> azx.presets.Preset:
    """`preset` with `factor` times the game rows, and the learner batch and the buffer
    grown alike: the same positions per row, the same ring per row."""
    config = preset.config
    config = dataclasses.replace(
        config,
        num_envs=config.num_envs * factor,
        batch_size=config.batch_size * factor,
        buffer_capacity=config.buffer_capacity * factor,
    )
    return dataclasses.replace(preset, config=config)


def state_shapes(preset: azx.presets.Preset):
    """The trainer and the shapes of its initial state (no arrays allocated)."""
    env = preset.make_env()
    trainer = azx.alphazero.AlphaZero(env, preset.recipe.make_search(), preset.config)
    net = preset.make_network(env, key=jax.random.key(0))
    return trainer, jax.eval_shape(lambda: trainer.init(net, key=jax.random.key(1)))


def step_memory(preset: azx.presets.Preset) -> dict:
    """XLA's accounting of one compiled training step, in bytes."""
    trainer, shapes = state_shapes(preset)
    key = jax.eval_shape(lambda: jax.random.key(0))
    start = time.perf_counter()
    compiled = jax.jit(trainer.step).lower(shapes, key).compile()
    seconds = time.perf_counter() - start
    analysis = compiled.memory_analysis()
    return {
        "num_envs": preset.config.num_envs,
        "argument": analysis.argument_size_in_bytes,
        "output": analysis.output_size_in_bytes,
        "alias": analysis.alias_size_in_bytes,
        "temp": analysis.temp_size_in_bytes,
        "compile_s": seconds,
    }


def network_memory(trainer, shapes) -> dict:
    """The network's activations, from XLA's accounting of two compiled functions at two
    batch sizes each (bytes per position): a forward pass over a batch of observations, as
    the search evaluates them (temporaries and outputs), and the learner's gradient of the
    loss over a minibatch (temporaries)."""
    env = trainer.env
    params, static = shapes.params, shapes.net_static
    num_actions = env.num_actions

    def positions(count):
        floats = jax.ShapeDtypeStruct((count,), np.float32)
        return azx.buffer.Batch(
            observation=jax.ShapeDtypeStruct(
                (count, *env.observation_shape), env.observation_dtype
            ),
            legal_action_mask=jax.ShapeDtypeStruct((count, num_actions), np.bool_),
            policy_target=jax.ShapeDtypeStruct((count, num_actions), np.float32),
            value_target=floats,
            root_value=floats,
            mask=jax.ShapeDtypeStruct((count,), np.bool_),
        )

    def forward(params, batch):
        return jax.vmap(eqx.combine(params, static))(batch.observation)

    def gradient(params, batch):
        def objective(params):
            return azx.alphazero.loss(eqx.combine(params, static), batch).loss

        return jax.grad(objective)(params)

    def slope(function, *, with_output, sizes=(256, 512)):
        analyses = [
            jax.jit(function).lower(params, positions(size)).compile().memory_analysis()
            for size in sizes
        ]
        used = [
            a.temp_size_in_bytes + (a.output_size_in_bytes if with_output else 0) for a in analyses
        ]
        return (used[1] - used[0]) / (sizes[1] - sizes[0])

    return {
        "forward": slope(forward, with_output=True),
        "gradient": slope(gradient, with_output=False),
    }


def measure(name: str) -> dict:
    preset = azx.presets.get(name)
    config = preset.config
    rows = config.num_envs
    trainer, shapes = state_shapes(preset)
    env = trainer.env

    # Replicated on every device: parameters, optimiser state, counters, metrics, key.
    fixed = {
        field.name: nbytes(getattr(shapes, field.name))
        for field in dataclasses.fields(shapes)
        if field.name not in shapes.row_fields and not field.metadata.get("static")
    }
    # Split over devices: per game row.
    per_row = {field: nbytes(getattr(shapes, field)) / rows for field in shapes.row_fields}

    # The tree's cost per simulation: its size at two simulation counts.
    tree_bytes = [
        nbytes(
            jax.eval_shape(lambda n=n: preset.recipe.make_search(num_simulations=n).init(env, rows))
        )
        for n in TREE_SIMULATIONS
    ]
    tree_per_simulation = (tree_bytes[1] - tree_bytes[0]) / (
        rows * (TREE_SIMULATIONS[1] - TREE_SIMULATIONS[0])
    )

    network = network_memory(trainer, shapes)

    # Temporaries of the compiled step at two row counts: the slope is their cost per row.
    steps = [step_memory(scaled(preset, factor)) for factor in (1, 2)]
    print(
        f"{name}: compiled the step in "
        + ", ".join(f"{s['compile_s']:.0f} s ({s['num_envs']} rows)" for s in steps),
        file=sys.stderr,
        flush=True,
    )
    added_rows = steps[1]["num_envs"] - steps[0]["num_envs"]
    temp_per_row = (steps[1]["temp"] - steps[0]["temp"]) / added_rows
    temp_fixed = steps[0]["temp"] - temp_per_row * rows
    state_per_row = sum(per_row.values())
    return {
        "preset": name,
        "network": preset.network,
        "search": preset.recipe.search,
        "num_simulations": preset.recipe.search_options["num_simulations"],
        "num_envs": rows,
        "batch_size": config.batch_size,
        "buffer_capacity": config.buffer_capacity,
        "positions_per_row": config.buffer_capacity // rows,
        "fixed_bytes": fixed,
        "row_bytes": per_row,
        "buffer_bytes_per_position": nbytes(shapes.buffer) / config.buffer_capacity,
        "tree_bytes_per_simulation": tree_per_simulation,
        "state_bytes_per_row": state_per_row,
        "temp_bytes_per_row": temp_per_row,
        "temp_bytes_fixed": temp_fixed,
        "forward_bytes_per_position": network["forward"],
        "gradient_bytes_per_position": network["gradient"],
        "steps": steps,
    }


def device_bytes(record: dict, *, donated: bool = False) -> tuple[float, float]:
    """`(fixed, per_row)`: a device holding `rows` game rows needs about
    `fixed + rows * per_row` bytes during a step. Fixed: parameters, optimiser state and
    the rest of the replicated state, plus the temporaries that do not grow with the rows.
    Per row: the row's state plus its temporaries. The state counts twice (input and
    output) unless the caller donates it (`jax.jit(..., donate_argnums=0)`), which lets XLA
    write the output over the input."""
    copies = 1 if donated else 2
    replicated = sum(record["fixed_bytes"].values())
    fixed = copies * replicated + max(record["temp_bytes_fixed"], 0.0)
    per_row = copies * record["state_bytes_per_row"] + record["temp_bytes_per_row"]
    return fixed, per_row


def largest_num_envs(record: dict, gib: float, *, donated: bool = False) -> int:
    """The most game rows that one device of `gib` GiB holds during a step,
    `floor((memory - fixed) / per_row)`, with the preset's ring of positions per row."""
    fixed, per_row = device_bytes(record, donated=donated)
    return max(int((gib * GIB - fixed) // per_row), 0)


def _kib(value: float) -> str:
    return f"{value / 2**10:,.1f}"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f}"


def tables(records: list[dict]) -> str:
    lines = [
        "Per game row (KiB): the row's part of the state, and the step's temporaries.",
        "",
        "| preset | search | positions / row | env state | tree | buffer | state / row "
        "| step temporaries / row |",
        "|" + "---|" * 8,
    ]
    for r in records:
        row = r["row_bytes"]
        lines.append(
            f"| {r['preset']} | {r['search']} {r['num_simulations']} "
            f"| {r['positions_per_row']} | {_kib(row['env_state'])} | {_kib(row['tree'])} "
            f"| {_kib(row['buffer'])} | {_kib(r['state_bytes_per_row'])} "
            f"| {_kib(r['temp_bytes_per_row'])} |"
        )
    lines += [
        "",
        "Per unit (bytes): a tree node's worth of simulation, a stored position, and the "
        "network's activations per position.",
        "",
        "| preset | tree / simulation | buffer / position | forward / position "
        "| gradient / position |",
        "|" + "---|" * 5,
    ]
    for r in records:
        lines.append(
            f"| {r['preset']} | {r['tree_bytes_per_simulation']:,.0f} "
            f"| {r['buffer_bytes_per_position']:,.0f} | {r['forward_bytes_per_position']:,.0f} "
            f"| {r['gradient_bytes_per_position']:,.0f} |"
        )
    lines += [
        "",
        "Replicated (KiB) and XLA's accounting of the compiled step (MiB) at the preset's "
        "num_envs and twice it.",
        "",
        "| preset | params | optimiser state | num_envs | arguments | outputs | temporaries "
        "| temporaries, 2x rows |",
        "|" + "---|" * 8,
    ]
    for r in records:
        fixed = r["fixed_bytes"]
        one, two = r["steps"]
        lines.append(
            f"| {r['preset']} | {_kib(fixed['params'])} | {_kib(fixed['opt_state'])} "
            f"| {r['num_envs']} | {_mib(one['argument'])} | {_mib(one['output'])} "
            f"| {_mib(one['temp'])} | {_mib(two['temp'])} |"
        )
    heads = " | ".join(f"{gib} GiB" for gib in MEMORIES_GIB)
    for donated in (False, True):
        lines += [
            "",
            "Largest num_envs per device, floor((memory - fixed) / per row), state "
            + ("donated (one copy)." if donated else "not donated (input and output)."),
            "",
            f"| preset | fixed (MiB) | per row (KiB) | {heads} |",
            "|" + "---|" * (3 + len(MEMORIES_GIB)),
        ]
        for r in records:
            fixed, per_row = device_bytes(r, donated=donated)
            fits = " | ".join(
                f"{largest_num_envs(r, gib, donated=donated):,}" for gib in MEMORIES_GIB
            )
            lines.append(f"| {r['preset']} | {_mib(fixed)} | {_kib(per_row)} | {fits} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    alphazero = [
        name
        for name in azx.presets.names()
        if isinstance(azx.presets.get(name).recipe, azx.presets.AlphaZeroRecipe)
    ]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=alphazero, choices=alphazero)
    parser.add_argument("--json", metavar="PATH", help="write the records as JSON here")
    args = parser.parse_args(argv)
    print(f"# memory of the presets, compiled for {jax.default_backend()}", file=sys.stderr)
    records = [measure(name) for name in args.presets]
    print(tables(records))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(records, file, indent=1)
    return records


if __name__ == "__main__":
    main()
