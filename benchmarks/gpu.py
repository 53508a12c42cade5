"""One command for a GPU loan: search, training, PPO, MuZero's search and several seeds,
timed within a wall-clock budget, written as a Markdown and a JSON report.

    python -m benchmarks.gpu [--out DIR] [--budget SECONDS] [--seeds 8]
                             [--only SECTION ...] [--smoke]

Five sections, in this order (docs/gpu.md describes every field and its unit):

- `search`: native PUCT and Gumbel (on the default backend, which runs `UnrolledBackend`
  off the CPU, and on `LockstepBackend`) against mctx's and against the floor (the same
  network calls and environment steps without the tree), at batch 4096, 1024 and 256
  (the largest first, so that a short budget drops the smallest), with the benchmark
  MLP on connect four and an AlphaZero ResNet of 6 blocks x 128 channels (pgx's
  AlphaZero example) on go 9x9 (`benchmarks.search`'s functions).
- `alphazero`: training iterations a second of the `connect_four` preset and of the same
  on go 9x9 with that ResNet and 1024 games, self-play and learning timed apart
  (`benchmarks.train`).
- `muzero_search`: the search over MuZero's learned model, native against mctx
  (`benchmarks.muzero_search`).
- `ppo`: `ppo_pendulum` against the one-program continuous PPO in this process, timed in
  turns (`benchmarks.ppo`; rejax's reference environment, which pip builds, is not used).
- `seeds`: `--seeds` seeds trained as one program under `vmap` against one seed, for the
  `connect_four` and `ppo_cartpole` presets.

Every figure comes with its compile seconds. Each section, and each group of cases in it,
has a share of `--budget`; a case whose predecessor in its group took longer than the
group has left (or, for the first, an estimate) is recorded as `skipped: over budget`
instead of run, so that the whole command ends near the budget (default 460 s: with
imports and the last case, within 8 minutes on one H200). A case that fails is recorded
with its error and the rest goes on. `--smoke` runs every section at tiny sizes (batch 4,
a few simulations, one iteration; the search on connect four only, the seeds on
`ppo_cartpole` only): about 90 s of compiling on a 2-core CPU, the slow test tier's check
that the command still runs (tests/test_gpu_benchmark.py).

The report goes to `DIR/report.json` and `DIR/report.md` (default DIR:
`benchmarks/gpu_report`).
"""

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import equinox as eqx
import jax

import azx
from azx.search import LockstepBackend

from . import muzero_search, ppo, search, train
from ._settings import preset_with


SECTIONS = ("search", "alphazero", "muzero_search", "ppo", "seeds")
PACKAGES = ("jax", "jaxlib", "mctx", "pgx", "equinox", "optax", "flax", "gymnax", "numpy")


def go_settings(channels: int, blocks: int, num_envs: int, num_simulations: int) -> tuple:
    """`--set` settings that make the `connect_four` preset a go 9x9 one: pgx's AlphaZero
    example's network (a ResNet, 6 blocks of 128 channels in the full run) and self-play
    batch (1024 games), Gumbel search with its default 16 considered moves."""
    return (
        "env=go_9x9",
        "network=resnet",
        f'network_options={{"channels": {channels}, "num_blocks": {blocks}}}',
        f'search_options={{"num_simulations": {num_simulations}}}',
        f"num_envs={num_envs}",
        f"batch_size={2 * num_envs}",
        # Room for a whole game in every row (go ends by move 162), so that finished
        # games reach the learner.
        f"buffer_capacity={256 * num_envs}",
        "random_opening_moves=0",
        "augment_symmetries=false",
    )


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What one run measures, the shares of the budget (fractions of `--budget`) of its
    groups of cases, and estimates of their first cases (seconds)."""

    search_envs: tuple[str, ...]  # "connect_four" (the MLP), "go_9x9" (the ResNet)
    search_batches: tuple[int, ...]
    search_simulations: int
    search_repeats: int
    resnet: tuple[int, int]  # channels, blocks of the search section's go network
    connect_four_settings: tuple[str, ...]  # `--set` settings of the AlphaZero presets
    go_settings: tuple[str, ...]
    alphazero_repeats: int
    muzero_batches: tuple[int, ...]
    muzero_simulations: int
    muzero_repeats: int
    ppo_iterations: int
    ppo_repeats: int
    seeds_presets: tuple[str, ...]
    seeds_iterations: int
    seeds_repeats: int
    shares: dict[str, float]
    estimates: dict[str, float]


FULL = Sizes(
    search_envs=("connect_four", "go_9x9"),
    search_batches=(4096, 1024, 256),
    search_simulations=32,
    search_repeats=5,
    resnet=(128, 6),
    connect_four_settings=(),
    go_settings=go_settings(128, 6, num_envs=1024, num_simulations=32),
    alphazero_repeats=3,
    muzero_batches=(4096, 1024, 256),
    muzero_simulations=32,
    muzero_repeats=5,
    ppo_iterations=10,
    ppo_repeats=5,
    seeds_presets=("connect_four", "ppo_cartpole"),
    seeds_iterations=5,
    seeds_repeats=3,
    # Of 460 s, from the first loan's run on an H200 (benchmarks/gpu_report): search
    # 120 + 138 (one batch takes 35-50 s with its seven compilations), alphazero 23 + 41,
    # muzero 46, ppo 32, seeds 32 + 28.
    shares={
        "search connect_four": 0.26,
        "search go_9x9": 0.30,
        "alphazero connect_four": 0.05,
        "alphazero go_9x9": 0.09,
        "muzero_search": 0.10,
        "ppo": 0.07,
        "seeds connect_four": 0.07,
        "seeds ppo_cartpole": 0.06,
    },
    estimates={
        "search connect_four": 50.0,
        "search go_9x9": 50.0,
        "alphazero connect_four": 20.0,
        "alphazero go_9x9": 37.0,
        "muzero_search": 18.0,
        "ppo": 29.0,
        "seeds connect_four": 30.0,
        "seeds ppo_cartpole": 15.0,
    },
)

_SMOKE_LEARNER = ("train_steps=1", "search.num_simulations=2")
# Each path of the code once: the search section on one of its two cases and the seeds
# section on one of its two presets (the other, the same code on other programs, would add
# about 40 s of compiling to the smoke run's minute or two).
SMOKE = dataclasses.replace(
    FULL,
    search_envs=("connect_four",),
    search_batches=(4,),
    search_simulations=4,
    search_repeats=1,
    resnet=(8, 1),
    connect_four_settings=(
        "num_envs=4",
        "batch_size=8",
        "buffer_capacity=1024",
        'network_options={"width": 16, "depth": 1}',
        *_SMOKE_LEARNER,
    ),
    go_settings=go_settings(8, 1, num_envs=4, num_simulations=2) + _SMOKE_LEARNER,
    alphazero_repeats=1,
    muzero_batches=(4,),
    muzero_simulations=4,
    muzero_repeats=1,
    ppo_iterations=1,
    ppo_repeats=1,
    seeds_presets=("ppo_cartpole",),
    seeds_iterations=1,
    seeds_repeats=1,
    estimates=dict.fromkeys(FULL.estimates, 0.0),
)


class Budget:
    """The run's wall-clock deadline, and groups of cases each with a share of it."""

    def __init__(self, seconds: float, sizes: Sizes):
        self.seconds, self.sizes = seconds, sizes
        self.deadline = time.perf_counter() + seconds

    def group(self, name: str) -> "Group":
        share = self.sizes.shares[name] * self.seconds
        return Group(min(self.deadline, time.perf_counter() + share), self.sizes.estimates[name])


class Group:
    """Cases that share a deadline: each runs only if the one before it (or, for the
    first, `estimate` seconds) would still end before the deadline."""

    def __init__(self, deadline: float, estimate: float):
        self.deadline, self.estimate = deadline, estimate

    def run(self, setting: dict, measure: Callable[[], list[dict]]) -> list[dict]:
        """`measure()`'s records (each `{"setting": ..., "figures": ...}`), or one record
        of `setting` saying why there are none: skipped over budget, or the error."""
        if time.perf_counter() + self.estimate > self.deadline:
            print(f"skipped over budget: {setting}", file=sys.stderr, flush=True)
            return [{"setting": setting, "skipped": "over budget"}]
        start = time.perf_counter()
        try:
            records = measure()
        except Exception as error:  # a failed case (out of memory, say) ends only itself
            traceback.print_exc()
            records = [{"setting": setting, "error": f"{type(error).__name__}: {error}"}]
        self.estimate = time.perf_counter() - start
        for record in records:
            print(json.dumps(record), file=sys.stderr, flush=True)
        return records


def search_section(budget: Budget, sizes: Sizes) -> list[dict]:
    channels, blocks = sizes.resnet
    cases = [
        ("connect_four", "mlp 128x2", lambda env, key: search.make_net("mlp", env, key)),
        (
            "go_9x9",
            f"resnet {channels}x{blocks}",
            lambda env, key: azx.nets.AlphaZeroResNet(
                env.observation_shape,
                env.num_actions,
                channels=channels,
                num_blocks=blocks,
                key=key,
            ),
        ),
    ]
    records = []
    for env_name, net_name, make_net in cases:
        if env_name not in sizes.search_envs:
            continue
        group = budget.group(f"search {env_name}")
        env = azx.envs.make(env_name)
        for batch_size in sizes.search_batches:
            setting = {
                "env": env_name,
                "net": net_name,
                "batch_size": batch_size,
                "num_simulations": sizes.search_simulations,
                "repeats": sizes.search_repeats,
            }
            records += group.run(
                setting, lambda: _search_case(env, make_net, setting, sizes.search_repeats)
            )
            jax.clear_caches()
    return records


def _search_case(env, make_net, setting: dict, repeats: int) -> list[dict]:
    """Both searches on both backends, the native ones also on `LockstepBackend` (one level
    and a few path positions per loop iteration; `native` is the default,
    `PlatformBackend`, which runs `UnrolledBackend` off the CPU), and the floor, timed in
    turns on the same roots."""
    batch_size, num_simulations = setting["batch_size"], setting["num_simulations"]
    net = make_net(env, jax.random.key(1))
    states = search.root_states(env, batch_size, 6, jax.random.key(2))
    params, static = eqx.partition(net, eqx.is_array)
    fns = {"floor": search.floor_fn(static, env, num_simulations)}
    for algo in search.ALGOS:
        for backend in search.BACKENDS:
            searcher = search.make_search(algo, backend, num_simulations)
            fns[f"{backend} {algo}"] = search.search_fn(searcher, static, env)
        lockstep = dataclasses.replace(
            search.make_search(algo, "native", num_simulations), backend=LockstepBackend()
        )
        fns[f"lockstep {algo}"] = search.search_fn(lockstep, static, env)
    results = search.timed(fns, (params, states, jax.random.key(0)), repeats)
    floor_ms = results["floor"][1]
    records = []
    for name, (compile_s, ms) in results.items():
        figures = {
            "ms_per_call": ms,
            "simulations_per_s": batch_size * num_simulations / (ms / 1000.0),
            "compile_s": compile_s,
        }
        if name != "floor":
            figures["times_floor"] = ms / floor_ms
        backend, _, algo = name.partition(" ")
        if backend in ("native", "lockstep"):
            figures["speed_up_over_mctx"] = results[f"mctx {algo}"][1] / ms
        if backend == "native":
            figures["speed_up_over_lockstep"] = results[f"lockstep {algo}"][1] / ms
        records.append({"setting": setting | {"search": name}, "figures": figures})
    return records


def alphazero_section(budget: Budget, sizes: Sizes) -> list[dict]:
    records = []
    for game, settings in (
        ("connect_four", sizes.connect_four_settings),
        ("go_9x9", sizes.go_settings),
    ):
        group = budget.group(f"alphazero {game}")
        preset = preset_with("connect_four", list(settings))
        network = preset.network + "".join(
            f" {key}={value}" for key, value in sorted(preset.network_options.items())
        )
        setting = train.setting(preset, network) | {"repeats": sizes.alphazero_repeats}

        def measure(preset=preset, network=network, setting=setting):
            r = train.measure_preset(preset, sizes.alphazero_repeats, network=network)
            figures = {
                "iterations_per_s": 1.0 / r["step_s"],
                "selfplay_s": r["selfplay_s"],
                "learn_s": r["learn_s"],
                "selfplay_moves_per_s": r["selfplay_moves_per_s"],
                "learner_updates_per_s": r["learner_updates_per_s"],
                "selfplay_compile_s": r["selfplay_compile_s"],
                "learn_compile_s": r["learn_compile_s"],
            }
            return [{"setting": setting, "figures": figures}]

        records += group.run(setting, measure)
        jax.clear_caches()
    return records


def muzero_section(budget: Budget, sizes: Sizes) -> list[dict]:
    group = budget.group("muzero_search")
    records = []
    for batch in sizes.muzero_batches:
        setting = {
            "network": "mlp 128, embedding 64",
            "batch": batch,
            "num_simulations": sizes.muzero_simulations,
            "repeats": sizes.muzero_repeats,
        }

        def measure(setting=setting):
            found = muzero_search.measure(
                setting["batch"], sizes.muzero_simulations, sizes.muzero_repeats
            )
            return [
                {
                    "setting": setting | {"search": r["search"], "num_actions": r["num_actions"]},
                    "figures": {
                        "ms_per_search": 1000.0 * r["seconds"],
                        "steps_per_s": r["steps_per_s"],
                        "compile_s": r["compile_s"],
                    },
                }
                for r in found
            ]

        records += group.run(setting, measure)
        jax.clear_caches()
    return records


def ppo_section(budget: Budget, sizes: Sizes) -> list[dict]:
    config = azx.presets.get("ppo_pendulum").config
    setting = {
        "env": "Pendulum-v1",
        "num_envs": config.num_envs,
        "rollout_length": config.rollout_length,
        "iterations_per_call": sizes.ppo_iterations,
        "repeats": sizes.ppo_repeats,
    }

    def measure():
        found = ppo.pendulum_against_one_program(sizes.ppo_repeats, sizes.ppo_iterations)
        return [
            {
                "setting": setting | {"system": r["system"]},
                "figures": {
                    "steps_per_s": r["steps_per_s"],
                    "steps_per_s_fastest_quarter": r["steps_per_s_fastest_quarter"],
                    "ratio_to_one_program": r["ratio_to"][ppo.ONE_PROGRAM],
                    "fastest_quarter_ratio_to_one_program": r["fastest_quarter_ratio_to"][
                        ppo.ONE_PROGRAM
                    ],
                    "compile_s": r["compile_s"],
                },
            }
            for r in found
        ]

    records = budget.group("ppo").run(setting, measure)
    jax.clear_caches()
    return records


def seeds_section(budget: Budget, sizes: Sizes, num_seeds: int) -> list[dict]:
    records = []
    for name in sizes.seeds_presets:
        settings = sizes.connect_four_settings if name == "connect_four" else ()
        preset = preset_with(name, list(settings))
        setting = {
            "preset": name,
            "num_envs": preset.config.num_envs,
            "iterations_per_call": sizes.seeds_iterations,
            "repeats": sizes.seeds_repeats,
        }

        def measure(preset=preset, setting=setting):
            return _seeds_case(preset, setting, num_seeds, sizes)

        records += budget.group(f"seeds {name}").run(setting | {"seeds": num_seeds}, measure)
        jax.clear_caches()
    return records


def _seeds_case(preset, setting: dict, num_seeds: int, sizes: Sizes) -> list[dict]:
    """`num_seeds` seeds under `vmap` (`azx train --seeds` on a GPU) and one seed alone,
    timed in turns, `iterations_per_call` training iterations a call."""
    iterations = sizes.seeds_iterations
    trainer, state = preset.build(seed=0)
    together_trainer, states = preset.build_seeds(range(num_seeds), vmap=True)
    runners = {
        1: ppo._AzxRunner(trainer, state, iterations),
        num_seeds: ppo._AzxRunner(
            together_trainer,
            states,
            iterations,
            train=azx.parallel.over_seeds(together_trainer.train, vmap=True),
        ),
    }
    times = ppo._alternate(runners, sizes.seeds_repeats)
    seconds = {seeds: sorted(times[seeds])[len(times[seeds]) // 2] for seeds in runners}
    rate = {seeds: seeds * iterations / seconds[seeds] for seeds in runners}
    records = []
    for seeds, runner in runners.items():
        figures = {
            "seconds_per_call": seconds[seeds],
            "iterations_per_s": iterations / seconds[seeds],
            "seed_iterations_per_s": rate[seeds],
            "env_steps_per_s": seeds * runner.env_steps_per_call / seconds[seeds],
            "compile_s": runner.compile_seconds,
        }
        if seeds != 1:
            figures["speed_up_over_one_seed"] = rate[seeds] / rate[1]
        vmapped = {"seeds": seeds, "vmap": seeds != 1}
        records.append({"setting": setting | vmapped, "figures": figures})
    return records


def environment(argv: list[str], smoke: bool, budget_s: float) -> dict:
    """The device, the versions and the command of this run."""
    device = jax.devices()[0]
    memory = None
    with contextlib.suppress(Exception):  # only some backends report their memory
        memory = (device.memory_stats() or {}).get("bytes_limit")
    versions = {"python": platform.python_version(), "azx": azx.__version__}
    for package in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    for dist in metadata.distributions():  # the CUDA plugin that a jax[cuda] install adds
        name = dist.metadata["Name"] or ""
        if name.lower().replace("_", "-").startswith(("jax-cuda", "jax-rocm")):
            versions[name] = dist.version
    commit = "unknown"
    with contextlib.suppress(Exception):
        here = Path(__file__).parent
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return {
        "command": "python -m benchmarks.gpu " + " ".join(argv),
        "smoke": smoke,
        "budget_s": budget_s,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "device": {
            "kind": device.device_kind,
            "platform": device.platform,
            "count": jax.device_count(),
            "memory_gib": None if memory is None else round(memory / 2**30, 1),
            "host_cpus": os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "versions": versions,
    }


DESCRIPTIONS = {
    "search": "One batched search call (`benchmarks.search`): native and mctx, PUCT and "
    "Gumbel, against the floor (the same network calls and environment steps without a "
    "tree), timed in turns; median of `repeats` calls after a warm-up.",
    "alphazero": "AlphaZero training (`benchmarks.train`): `self_play` and `learn` jitted "
    "apart, the learner on a buffer that self-play filled; median of `repeats` calls.",
    "muzero_search": "The search over MuZero's learned model (`benchmarks.muzero_search`); "
    "median of `repeats` calls after a warm-up.",
    "ppo": "`ppo_pendulum` against a one-program PPO written the way purejaxrl writes its "
    "continuous PPO, on the same settings, timed in turns (`benchmarks.ppo`).",
    "seeds": "Several seeds trained as one program under `vmap` (`azx train --seeds`) "
    "against one seed alone, timed in turns (median of `repeats` calls).",
}


def markdown(report: dict) -> str:
    device, versions = report["device"], report["versions"]
    memory = "memory not reported"
    if device["memory_gib"] is not None:
        memory = f"{device['memory_gib']} GiB for JAX"
    lines = [
        f"# GPU benchmark on {device['kind']}",
        "",
        f"- device: {device['kind']} ({device['platform']}, {device['count']} device(s), "
        f"{memory}), {device['host_cpus']} host CPUs",
        "- versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
        f"- command: `{report['command']}` (smoke: {report['smoke']}), commit {report['commit']}",
        f"- {report['date']}, {report['wall_s']:.0f} s of a budget of {report['budget_s']:.0f} s",
    ]
    if device["xla_flags"]:
        lines.append(f"- XLA_FLAGS: `{device['xla_flags']}`")
    for name, section in report["sections"].items():
        lines += ["", f"## {name}", "", DESCRIPTIONS[name], "", table(section["records"])]
        lines += ["", f"Section wall time {section['wall_s']:.1f} s."]
    return "\n".join(lines) + "\n"


def table(records: list[dict]) -> str:
    """A Markdown table: the settings' columns, then the figures'; a skipped or failed
    case says why in its first figure's column."""
    setting_keys, figure_keys = {}, {}
    for record in records:
        setting_keys.update(dict.fromkeys(record["setting"]))
        figure_keys.update(dict.fromkeys(record.get("figures", {})))
    figure_keys = list(figure_keys) or ["result"]
    lines = [
        "| " + " | ".join([*setting_keys, *figure_keys]) + " |",
        "|" + "---|" * (len(setting_keys) + len(figure_keys)),
    ]
    for record in records:
        cells = [str(record["setting"].get(key, "")) for key in setting_keys]
        if "figures" in record:
            cells += [_number(record["figures"].get(key)) for key in figure_keys]
        else:
            why = f"skipped: {record['skipped']}" if "skipped" in record else record["error"]
            cells += [why.replace("|", "/").splitlines()[0]] + [""] * (len(figure_keys) - 1)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value) -> str:
    if value is None:
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/gpu_report", help="report directory")
    parser.add_argument("--budget", type=float, help="seconds (default 460; --smoke 1800)")
    parser.add_argument("--seeds", type=int, default=8, help="seeds under vmap")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="these sections only")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a check on a CPU")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    budget_s = args.budget or (1800.0 if args.smoke else 460.0)
    budget = Budget(budget_s, sizes)
    started = time.perf_counter()
    argv = sys.argv[1:] if argv is None else list(argv)
    report = environment(argv, args.smoke, budget_s)
    print(f"# GPU benchmark on {report['device']['kind']}", file=sys.stderr, flush=True)
    runs = {
        "search": lambda: search_section(budget, sizes),
        "alphazero": lambda: alphazero_section(budget, sizes),
        "muzero_search": lambda: muzero_section(budget, sizes),
        "ppo": lambda: ppo_section(budget, sizes),
        "seeds": lambda: seeds_section(budget, sizes, args.seeds),
    }
    report["sections"] = {}
    for name in args.only or SECTIONS:
        start = time.perf_counter()
        records = runs[name]()
        report["sections"][name] = {"wall_s": time.perf_counter() - start, "records": records}
    report["wall_s"] = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, allow_nan=True) + "\n")
    (out / "report.md").write_text(markdown(report))
    print(f"wrote {out / 'report.md'} and {out / 'report.json'}", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
