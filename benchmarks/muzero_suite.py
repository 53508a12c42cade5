"""MuZero against PPO on the same tasks at the same environment steps, each with the one
configuration of its observation kind, over several seeds.

    python -m benchmarks.muzero_suite [--tasks cartpole catch fourrooms breakout freeway]
                                      [--seeds 0 1 2] [--episodes 32] [--json PATH]
                                      [--muzero-set KEY=VALUE ...] [--ppo-set KEY=VALUE ...]
                                      [--points K --plot PATH] [--muzero-sampled]

The tasks: CartPole-v1, Catch-bsuite and FourRooms-misc at 100,000 environment steps;
Breakout-MinAtar and Freeway-MinAtar at 409,600. `--tasks acrobot` adds a vector task no
configuration was tuned on (Acrobot-v1, 100,000 steps). MuZero trains `muzero_cartpole`'s
configuration on vector observations and `muzero_breakout`'s on MinAtar's planes; PPO
`ppo_cartpole`'s and `ppo_breakout`'s. Each run's iterations, and the length of its
learning-rate schedule (MuZero's decay, PPO's anneal), are set so that it takes the
task's steps, rounded up to whole iterations. `--muzero-set` and `--ppo-set` change a
configuration on every task (as `azx train --set` does), for paired runs on the same
seeds.

Each seed is evaluated over `--episodes` episodes: MuZero by its search with the noise
off (`azx.muzero.evaluate`; with `--muzero-sampled`, the search as self-play runs it), PPO
by sampling its policy (`azx.ppo.evaluate`, as `azx eval` does). A run whose episodes all
return the same says so: a greedy search from a few starts over deterministic dynamics
(Breakout-MinAtar has two) plays the same episodes again. Prints a line per run, then a
table: each algorithm's mean return over the seeds with a 95% interval across them
(Student's t), and MuZero's mean minus PPO's.

`--points K` also evaluates every run at K - 1 evenly spaced points before its end (its
training runs in calls that end there, which changes none of it; every evaluation of a
seed draws on the same key as the final one), each record gaining `curve`, `[[env_steps,
return_mean], ...]`; `--plot PATH` draws those curves, a panel per task, each seed thin
and the mean over the seeds thick.
"""

import argparse
import dataclasses
import json
import math
import time

import equinox as eqx
import jax
import numpy as np

import azx
from azx._report import mean_interval
from benchmarks.muzero_cartpole import train_in_chunks
from benchmarks.ppo_learning import evaluate as ppo_evaluate, evaluation_record


@dataclasses.dataclass(frozen=True)
class Task:
    env: str
    steps: int
    muzero: str  # the preset whose configuration MuZero trains
    ppo: str


VECTOR = ("muzero_cartpole", "ppo_cartpole")
PLANES = ("muzero_breakout", "ppo_breakout")
TASKS = {
    "cartpole": Task("gymnax:CartPole-v1", 100_000, *VECTOR),
    "catch": Task("gymnax:Catch-bsuite", 100_000, *VECTOR),
    "fourrooms": Task("gymnax:FourRooms-misc", 100_000, *VECTOR),
    "breakout": Task("gymnax:Breakout-MinAtar", 409_600, *PLANES),
    "freeway": Task("gymnax:Freeway-MinAtar", 409_600, *PLANES),
}
# A vector task that no configuration was tuned on, to judge the vector configuration off
# its tuning path; `--tasks` takes it, the default suite leaves it out.
HELD_OUT = {
    "acrobot": Task("gymnax:Acrobot-v1", 100_000, *VECTOR),
}
ALL_TASKS = TASKS | HELD_OUT


def fitted(name: str, env: str, steps: int, settings: list[str]) -> azx.presets.Preset:
    """Preset `name` on `env` with `settings`, its iterations and schedule fitted to
    `steps` environment steps."""
    preset = azx.presets.get(name).changed(env=env, settings=settings)
    trainer, _ = preset.build(seed=0)
    per_iteration = trainer.env_steps_per_iteration
    iterations = math.ceil(steps / per_iteration)
    schedule = preset.recipe.schedule
    return preset.changed(settings=[f"iterations={iterations}", f"{schedule}={iterations}"])


def run(
    algorithm: str, preset, seed: int, episodes: int, points: int = 1, sampled: bool = False
) -> dict:
    """One seed of `preset` trained to its end and evaluated over `episodes`; with
    `points` > 1, evaluated as well after each of `points` equal parts of the run; with
    `sampled`, MuZero's search plays as self-play runs it."""
    trainer, state = preset.build(seed=seed)
    key = jax.random.key(10_000 + seed)
    every = math.ceil(preset.iterations / points)
    curve, seconds = [], 0.0
    for state, _, _, seconds in train_in_chunks(
        trainer.train_and_record, state, preset.iterations, every
    ):
        result = _evaluate(algorithm, preset, trainer, state, episodes, key, sampled)
        curve.append([trainer.env_steps(state), result.mean_return()])
    record = evaluation_record(seed, trainer, state, seconds, result)
    return record | ({"curve": curve} if points > 1 else {})


_muzero_evaluate = eqx.filter_jit(azx.muzero.evaluate)


def _evaluate(algorithm: str, preset, trainer, state, episodes: int, key, sampled: bool):
    """MuZero's search with its noise off (or, `sampled`, with it on), or PPO's policy
    sampled (as `azx eval`)."""
    if algorithm == "muzero":
        return _muzero_evaluate(
            trainer, state.net, num_episodes=episodes, key=key, greedy=not sampled
        )
    return ppo_evaluate(preset, trainer, state, episodes, key, greedy=False)


def plot(results: dict, tasks: list[str], algorithms: list[str], path: str) -> None:
    """Each task's curves of `--points`: every seed thin, the mean over seeds thick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        1, len(tasks), figsize=(4.4 * len(tasks), 3.8), squeeze=False, layout="constrained"
    )
    for name, panel in zip(tasks, axes[0]):
        for algorithm, color in zip(algorithms, ("tab:blue", "tab:orange")):
            curves = [np.asarray(r["curve"]) for r in results[name, algorithm]["records"]]
            for curve in curves:
                panel.plot(curve[:, 0], curve[:, 1], color=color, alpha=0.3, linewidth=1)
            mean = np.mean([curve[:, 1] for curve in curves], axis=0)
            label = f"{algorithm} (mean of {len(curves)} seeds)"
            panel.plot(curves[0][:, 0], mean, color=color, linewidth=2.5, marker="o", label=label)
        panel.set(title=ALL_TASKS[name].env, xlabel="environment steps", ylabel="return")
        panel.xaxis.set_major_formatter(lambda steps, _: f"{steps / 1000:.0f}k")
        panel.legend(fontsize="small")
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=list(ALL_TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--algorithms", nargs="+", choices=("muzero", "ppo"))
    parser.add_argument("--muzero-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ppo-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", help="write every run's record to this JSON file")
    parser.add_argument("--points", type=int, default=1, help="evaluations along each run")
    parser.add_argument("--plot", help="draw the --points curves into this image")
    parser.add_argument(
        "--muzero-sampled",
        action="store_true",
        help="evaluate MuZero's search as self-play runs it (its noise on), not greedily",
    )
    args = parser.parse_args(argv)
    algorithms = args.algorithms or ["muzero", "ppo"]
    results = {}
    for name in args.tasks:
        task = ALL_TASKS[name]
        for algorithm in algorithms:
            base = task.muzero if algorithm == "muzero" else task.ppo
            settings = args.muzero_set if algorithm == "muzero" else args.ppo_set
            preset = fitted(base, task.env, task.steps, settings)
            records = []
            for seed in args.seeds:
                started = time.perf_counter()
                record = run(
                    algorithm, preset, seed, args.episodes, args.points, args.muzero_sampled
                )
                record["wall_s"] = time.perf_counter() - started
                records.append(record)
                # A greedy player from a handful of starts (two in MinAtar Breakout) over
                # deterministic dynamics plays the same few episodes again and again; PPO
                # and `--muzero-sampled` sample their moves already.
                note = ""
                if record["return_min"] == record["return_max"]:
                    note = "; every episode returned the same"
                    if algorithm == "muzero" and not args.muzero_sampled:
                        note += " (--muzero-sampled samples the search)"
                print(
                    f"{name} {algorithm} seed {seed}: return {record['return_mean']:.2f} "
                    f"[{record['return_low']:.2f}, {record['return_high']:.2f}] over "
                    f"{args.episodes} episodes after {record['env_steps']} steps "
                    f"({record['wall_s']:.0f} s)" + note,
                    flush=True,
                )
            results[name, algorithm] = {"preset": preset.to_dict(), "records": records}
    print(table(results, args.tasks, algorithms))
    if args.plot:
        plot(results, args.tasks, algorithms, args.plot)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({f"{t} {a}": r for (t, a), r in results.items()}, file, indent=1)
    return results


def table(results: dict, tasks: list[str], algorithms: list[str]) -> str:
    lines = ["| task | steps | " + " | ".join(algorithms) + " | MuZero - PPO |"]
    lines.append("|" + "---|" * (len(algorithms) + 3))
    for name in tasks:
        means, cells = {}, []
        for algorithm in algorithms:
            returns = [r["return_mean"] for r in results[name, algorithm]["records"]]
            mean, low, high = mean_interval(returns)
            means[algorithm] = mean
            cells.append(f"{mean:.2f} [{low:.2f}, {high:.2f}] ({len(returns)} seeds)")
        gap = f"{means['muzero'] - means['ppo']:+.2f}" if len(means) == 2 else ""
        lines.append(f"| {name} | {ALL_TASKS[name].steps:,} | " + " | ".join(cells) + f" | {gap} |")
    return "\n".join(lines)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
