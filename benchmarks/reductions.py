"""What the cross-device reductions of a sharded training step cost: how many all-reduce
operations the compiled step runs, how many bytes they add up, and how long they take
next to the whole step.

    python -m benchmarks.reductions [--presets tic_tac_toe connect_four] [--devices 4] [--repeats 7]

Runs on a mesh of CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count`, set
here before JAX starts). For each preset, `azx.parallel.sharded_step` is compiled and its
HLO read: every `all-reduce` with the bytes of its result and the number of times it runs
per step (the trip counts of the loops around it). Then, in turns after a warm-up, the
step and a `shard_map` of the same reductions alone (`train_steps` sums of a
parameter-shaped pytree and the loss sums, as the learner makes them) are timed; the
medians and their ratio go to a markdown table on stdout.

CPU devices share one memory, so an all-reduce here is a copy within RAM: the times say
what the reductions cost next to the step's work on this machine, not over a GPU or TPU
interconnect. The bytes per step are the same on any platform.
"""

import argparse
import os
import re
import statistics
import sys
import time


def _parse_devices(argv) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--devices", type=int, default=4)
    return parser.parse_known_args(argv)[0].devices


if __name__ == "__main__":
    # The device count is fixed when JAX starts, so the flag goes in before the import.
    flag = f"--xla_force_host_platform_device_count={_parse_devices(sys.argv[1:])}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import azx  # noqa: E402


_ITEM_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
_SHAPE = re.compile(r"\b(" + "|".join(_ITEM_BYTES) + r")\[([\d,]*)\]")
_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$")
_CALLEE = re.compile(
    r"\b(body|condition|calls|to_apply|true_computation|false_computation)=%([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_ALL_REDUCE = re.compile(r"^\s*(?:ROOT )?%[\w.\-]+ = (.*?) all-reduce(?:-start)?\(")


def shape_bytes(text: str) -> int:
    """Bytes of every array shape written in `text` (an HLO result type, maybe a tuple)."""
    total = 0
    for dtype, dims in _SHAPE.findall(text):
        size = 1
        for dim in filter(None, dims.split(",")):
            size *= int(dim)
        total += size * _ITEM_BYTES[dtype]
    return total


def all_reduces(hlo: str) -> list[tuple[int, int]]:
    """`(bytes, runs per call)` of every all-reduce in the compiled module `hlo`. A while
    loop's body runs its known trip count times per run of the loop. A loop whose count
    XLA does not know (the search's) counts once; should an all-reduce sit in one, stderr
    says so."""
    computations: dict[str, list[str]] = {}
    entry, current = None, None
    for line in hlo.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(1)
            computations[current] = []
            if line.startswith("ENTRY"):
                entry = current
        elif line == "}":
            current = None
        elif current is not None:
            computations[current].append(line)

    # Who calls whom, how many times per call of the caller (None: unknown).
    callees: dict[str, list[tuple[str, int | None]]] = {name: [] for name in computations}
    for name, lines in computations.items():
        for line in lines:
            trips = _TRIP_COUNT.search(line)
            for kind, callee in _CALLEE.findall(line):
                times = 1
                if kind == "body":
                    times = None if trips is None else int(trips.group(1))
                callees[name].append((callee, times))
            for branches in _BRANCHES.findall(line):
                for callee in branches.split(","):
                    callees[name].append((callee.strip().lstrip("%"), 1))

    # Runs per call of the module: computations are a DAG, so sum over the call paths.
    runs: dict[str, int] = {}
    uncertain: set[str] = set()

    def visit(name: str, times: int, unknown: bool) -> None:
        runs[name] = runs.get(name, 0) + times
        if unknown:
            uncertain.add(name)
        for callee, per_call in callees.get(name, ()):
            visit(callee, times * (per_call or 1), unknown or per_call is None)

    visit(entry, 1, False)
    found = []
    for name, lines in computations.items():
        for line in lines:
            match = _ALL_REDUCE.match(line)
            if match:
                found.append((shape_bytes(match.group(1)), runs.get(name, 0)))
                if name in uncertain:
                    print(f"an all-reduce in a loop of unknown trip count: {name}", file=sys.stderr)
    return found


def medians(functions: dict, repeats: int) -> dict[str, float]:
    """Median seconds per call of each argument-free function, called in turns (one call
    of each per round) after two warm-up calls each."""
    for function in functions.values():
        for _ in range(2):
            jax.block_until_ready(function())
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            jax.block_until_ready(function())
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def reductions_alone(trainer, params, mesh):
    """A `shard_map` that makes the learner's sums and nothing else: per update, one sum
    of a parameter-shaped pytree and of the loss sums (six scalars), `train_steps` times.
    Each sum feeds the next, so XLA can neither hoist nor merge them."""
    devices = mesh.shape[azx.parallel.AXIS]
    losses = jnp.zeros(6, jnp.float32)

    def body(_, carry):
        summed = jax.lax.psum(carry, azx.parallel.AXIS)
        return jax.tree.map(lambda x: x / devices, summed)

    def reduce(carry):
        return jax.lax.fori_loop(0, trainer.config.train_steps, body, carry)

    mapped = jax.shard_map(reduce, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)
    return jax.jit(mapped), (params, losses)


def measure(name: str, repeats: int) -> dict:
    trainer, state = azx.presets.get(name).build(seed=0)
    mesh = azx.parallel.make_mesh()
    state = azx.parallel.shard_state(state, mesh)
    key = jax.random.key(0)
    step = jax.jit(azx.parallel.sharded_step(trainer, mesh))
    compiled = step.lower(state, key).compile()
    reductions = all_reduces(compiled.as_text())

    alone, carry = reductions_alone(trainer, state.params, mesh)
    alone_compiled = alone.lower(carry).compile()
    alone_bytes = sum(size * runs for size, runs in all_reduces(alone_compiled.as_text()))

    box = {"state": state}

    def run_step():
        box["state"] = compiled(box["state"], key)
        return box["state"]

    seconds = medians({"step": run_step, "alone": lambda: alone_compiled(carry)}, repeats)
    return {
        "preset": name,
        "devices": mesh.shape[azx.parallel.AXIS],
        "num_envs": trainer.config.num_envs,
        "train_steps": trainer.config.train_steps,
        "param_bytes": sum(x.nbytes for x in jax.tree.leaves(state.params)),
        "all_reduce_ops": len(reductions),
        "all_reduce_runs": sum(runs for _, runs in reductions),
        "bytes_per_step": sum(size * runs for size, runs in reductions),
        "alone_bytes_per_call": alone_bytes,
        "step_s": seconds["step"],
        "alone_s": seconds["alone"],
    }


def table(records: list[dict]) -> str:
    lines = [
        "| preset | devices | all-reduce ops in HLO | runs per step | bytes per step "
        "| bytes alone | step ms | reductions alone ms | share of step |",
        "|" + "---|" * 9,
    ]
    for r in records:
        lines.append(
            f"| {r['preset']} | {r['devices']} | {r['all_reduce_ops']} "
            f"| {r['all_reduce_runs']} | {r['bytes_per_step']:,} | {r['alone_bytes_per_call']:,} "
            f"| {1000 * r['step_s']:,.1f} | {1000 * r['alone_s']:,.2f} "
            f"| {r['alone_s'] / r['step_s']:.2%} |"
        )
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["tic_tac_toe", "connect_four"])
    parser.add_argument("--devices", type=int, default=4, help="CPU devices in the mesh")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds")
    args = parser.parse_args(argv)
    if len(jax.devices()) != args.devices:
        raise SystemExit(
            f"JAX has {len(jax.devices())} devices, not {args.devices}: run this as "
            "`python -m benchmarks.reductions`, which sets XLA_FLAGS before JAX starts"
        )
    records = []
    for name in args.presets:
        records.append(measure(name, args.repeats))
        print(f"measured {name}", file=sys.stderr, flush=True)
    print(table(records))
    return records


if __name__ == "__main__":
    main()
