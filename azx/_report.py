"""Evaluation results of a run as records and lines of text, and its pictures.

The records are what `metrics.jsonl` and `evals/` hold; the pictures are the run's
`learning_curve.png`.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np

from . import arena, ppo
from .envs import AbstractEnv


def match_record(result: arena.MatchResult) -> dict[str, Any]:
    """A match's counts, score and 95% interval as a JSON-ready dict."""
    low, high = result.score_interval()
    return {
        "games": result.num_games,
        "wins": result.wins,
        "draws": result.draws,
        "losses": result.losses,
        "as_first": list(result.as_first),
        "as_second": list(result.as_second),
        "score": result.score,
        "score_low": low,
        "score_high": high,
        "unfinished": result.num_unfinished,
    }


_play_match = eqx.filter_jit(arena.play_match)


def evaluate(
    env: AbstractEnv,
    agents: dict[str, arena.AbstractAgent],
    opponents: Sequence[str] | Mapping[str, arena.AbstractAgent],
    *,
    num_games: int,
    key,
    on_match: Callable[[str, str], None] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Play every agent against every opponent: a spec (see [`azx.arena.opponent`][]), or
    a name with its agent. `on_match(agent_name, opponent_name)`, if given, is called
    before each match (to show progress).

    **Returns:** `{agent_name: {opponent_name: match_record}}`.
    """
    if not isinstance(opponents, Mapping):
        opponents = {spec: arena.opponent(spec, env) for spec in opponents}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name, agent in agents.items():
        results[name] = {}
        for index, (spec, opponent) in enumerate(opponents.items()):
            if on_match is not None:
                on_match(name, spec)
            result = _play_match(
                env,
                agent,
                opponent,
                num_games=num_games,
                key=jax.random.fold_in(key, index),
            )
            results[name][spec] = match_record(result)
    return results


_episode_returns = eqx.filter_jit(arena.episode_returns)


def evaluate_episodes(
    env: AbstractEnv,
    agents: dict[str, arena.AbstractAgent],
    *,
    num_episodes: int,
    key,
    on_agent: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each agent's episodes of a single-player game ([`azx.arena.episode_returns`][]),
    all from the same key: `{agent_name: record}`, each record the episodes' mean return
    with its 95% interval, lowest and highest return, and how many did not finish."""
    results = {}
    for name, agent in agents.items():
        if on_agent is not None:
            on_agent(name)
        returns, finished = _episode_returns(env, agent, num_games=num_episodes, key=key)
        mean, low, high = mean_interval(returns)
        results[name] = {
            "episodes": num_episodes,
            "return_mean": mean,
            "return_low": low,
            "return_high": high,
            "return_min": float(np.min(returns)),
            "return_max": float(np.max(returns)),
            "unfinished": int(np.sum(~np.asarray(finished))),
        }
    return results


def describe_episodes(record: dict[str, Any]) -> str:
    """A single-player agent's episodes on one line: mean return and its 95% interval."""
    unfinished = f", {record['unfinished']} unfinished" if record["unfinished"] else ""
    return (
        f"return {record['return_mean']:.1f} [{record['return_low']:.1f}, "
        f"{record['return_high']:.1f}] over {record['episodes']} episodes (lowest "
        f"{record['return_min']:.0f}, highest {record['return_max']:.0f}){unfinished}"
    )


def play_episodes(trainer, state, num_episodes: int, key, greedy: bool) -> ppo.EvaluationResult:
    """`num_episodes` episodes of a PPO state's policy ([`azx.ppo.evaluate`][]), with the
    observation statistics it was trained with."""
    stats = state.observation_stats if trainer.config.normalize_observations else None
    return _evaluate_episodes(
        trainer.env,
        state.net,
        num_episodes=num_episodes,
        key=key,
        greedy=greedy,
        observation_stats=stats,
        action_distribution=trainer.config.action_distribution,
    )


_evaluate_episodes = eqx.filter_jit(ppo.evaluate)


def return_record(result: ppo.EvaluationResult, *, greedy: bool) -> dict[str, Any]:
    """Episode returns summarised as a JSON-ready dict: mean, 95% interval, lengths."""
    low, high = result.return_interval()
    return {
        "episodes": int(result.returns.shape[0]),
        "greedy": greedy,
        "return_mean": result.mean_return(),
        "return_low": low,
        "return_high": high,
        "return_min": float(np.min(result.returns)),
        "return_max": float(np.max(result.returns)),
        "length_mean": float(np.mean(result.lengths)),
        "unfinished": int(np.sum(~np.asarray(result.finished))),
    }


def evaluate_policy(trainer, state, *, num_episodes: int, key, greedy: bool) -> dict[str, Any]:
    """A PPO run's policy over `num_episodes` episodes, as a [`return_record`][]."""
    result = play_episodes(trainer, state, num_episodes, key, greedy)
    return return_record(result, greedy=greedy)


def describe_return(record: dict[str, Any]) -> str:
    """Mean return with its 95% interval and the mean length, on one line."""
    unfinished = f", {record['unfinished']} unfinished" if record["unfinished"] else ""
    return (
        f"return {record['return_mean']:.3f} [{record['return_low']:.3f}, "
        f"{record['return_high']:.3f}] over {record['episodes']} episodes "
        f"({'greedy' if record['greedy'] else 'sampled'}), mean length "
        f"{record['length_mean']:.1f}{unfinished}"
    )


def describe(record: dict[str, Any]) -> str:
    """`W/D/L` with per-colour counts and the score's 95% interval, on one line."""
    first, second = record["as_first"], record["as_second"]
    return (
        f"W/D/L {record['wins']}/{record['draws']}/{record['losses']} of {record['games']} "
        f"(first {'/'.join(map(str, first))}, second {'/'.join(map(str, second))}), "
        f"score {record['score']:.3f} [{record['score_low']:.3f}, {record['score_high']:.3f}]"
    )


# ----------------------------------------------------------------------------- pictures


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _steps_axis(axes, records: list[dict[str, Any]]) -> None:
    """A second x axis on top of `axes` (whose x is the iteration): environment steps."""
    from matplotlib.ticker import EngFormatter

    trained = [r for r in records if r["iteration"] > 0]
    if not trained:
        return
    per_iteration = trained[-1]["env_steps"] / trained[-1]["iteration"]
    top = axes.secondary_xaxis(
        "top", functions=(lambda i: i * per_iteration, lambda steps: steps / per_iteration)
    )
    top.xaxis.set_major_formatter(EngFormatter(sep=""))  # 15k, not 15000
    top.set_xlabel("environment steps (self-play moves)", fontsize="small")
    top.tick_params(labelsize="small")


def _title(figure, records: list[dict[str, Any]], what: str) -> None:
    """The run's extent in a title: iterations, steps and wall time so far."""
    if not records:
        return
    last = records[-1]
    seconds = last.get("elapsed_s")
    took = "" if seconds is None else (
        f", {seconds / 60:.1f} min" if seconds >= 120 else f", {seconds:.0f} s"
    )  # fmt: skip
    figure.suptitle(
        f"{what}: {last['iteration']} iterations, {last['env_steps']:,} environment steps"
        f"{took} (compile and evaluations included)",
        fontsize="medium",
    )


def _interval_bars(axes, x, intervals: list[tuple[float, float, float]], **style) -> None:
    """Points at each interval's estimate with bars from its low to its high end."""
    estimate, low, high = (np.asarray(column) for column in zip(*intervals))
    # An interval's end can miss its estimate by a rounding error (Wilson's interval at a
    # score of 0 or 1); matplotlib refuses negative bar lengths.
    below, above = np.maximum(estimate - low, 0.0), np.maximum(high - estimate, 0.0)
    axes.errorbar(x, estimate, yerr=[below, above], **style)


def plot_return_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "PPO"
) -> None:
    """A PPO run's returns (training episodes, and evaluations with 95% intervals, the
    untrained policy's at 0 steps), value loss, and policy loss and entropy against
    environment steps."""
    plt = _pyplot()
    from matplotlib.ticker import EngFormatter

    # The value loss (squared returns, in the tens) gets its own panel: beside it the
    # policy loss and entropy (about 1) would be flat lines at zero.
    figure, (returns, value, policy) = plt.subplots(
        1, 3, figsize=(14, 4.5), constrained_layout=True, sharex=True
    )
    trained = [r for r in records if r.get("episode_return") is not None]
    returns.plot(
        [r["env_steps"] for r in trained],
        [r["episode_return"] for r in trained],
        color="tab:blue",
        alpha=0.6,
        label="training episodes (mean of each logged call)",
    )
    evaluated = [r for r in records if "eval" in r]
    if evaluated:
        _interval_bars(
            returns,
            [r["env_steps"] for r in evaluated],
            [
                (r["eval"]["return_mean"], r["eval"]["return_low"], r["eval"]["return_high"])
                for r in evaluated
            ],
            color="tab:orange",
            marker="o",
            capsize=3,
            label="evaluation (95% interval)",
        )
    returns.set(xlabel="environment steps", ylabel="episode return", title="return")
    if records:
        returns.legend(fontsize="small")

    def series(name: str) -> tuple[list[Any], list[Any]]:
        # A policy algorithm's records without this loss leave its panel empty.
        kept = [r for r in records if name in r]
        return [r["env_steps"] for r in kept], [r[name] for r in kept]

    value.plot(*series("value_loss"), color="tab:green")
    value.set(xlabel="environment steps", title="value loss (mean over each logged call)")
    for name in ("policy_loss", "entropy"):
        policy.plot(*series(name), label=name)
    policy.set(xlabel="environment steps", title="policy loss and entropy")
    if any("policy_loss" in r or "entropy" in r for r in records):
        policy.legend(fontsize="small")
    for axes in (returns, value, policy):
        axes.xaxis.set_major_formatter(EngFormatter(sep=""))
    _title(figure, records, title)
    figure.savefig(path, dpi=100)
    plt.close(figure)


# Agents told apart by marker and line style as well as colour, and drawn side by side
# (a small shift along x), so that equal scores do not hide one another.
_AGENT_STYLES = {
    "search": {"color": "tab:blue", "marker": "o", "linestyle": "-"},
    "network": {"color": "tab:orange", "marker": "s", "linestyle": "--"},
}
_OTHER_STYLE = {"color": "tab:green", "marker": "^", "linestyle": ":"}
_AGENT_LABELS = {"search": "network + search", "network": "network alone (policy argmax)"}


def plot_learning_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """An AlphaZero run at a glance: losses (left), and one panel per evaluation opponent
    with every agent's score and 95% interval (the untrained agent's at iteration 0),
    against iteration (and environment steps, on top)."""
    plt = _pyplot()
    evaluated = [r for r in records if "eval" in r]
    agents = list(dict.fromkeys(a for r in evaluated for a in r["eval"]))
    opponents = list(dict.fromkeys(o for r in evaluated for a in r["eval"].values() for o in a))
    panels = max(len(opponents), 1)
    figure, axes = plt.subplots(
        1,
        1 + panels,
        figsize=(4.2 * (1 + panels), 4.6),
        constrained_layout=True,
        squeeze=False,
        sharex=True,
    )
    losses, score_axes = axes[0][0], axes[0][1:]
    logged = [r for r in records if "loss" in r]
    iterations = [r["iteration"] for r in logged]
    for name in ("loss", "policy_loss", "value_loss"):
        losses.plot(iterations, [r[name] for r in logged], label=name)
    losses.set(xlabel="iteration", ylabel="loss", title="training loss")
    if logged:
        losses.legend(fontsize="small")
    _steps_axis(losses, records)
    last = max((r["iteration"] for r in records), default=1)
    shift = 0.025 * max(last, 1)
    for panel, spec in zip(score_axes, opponents or [None]):
        for number, agent in enumerate(agents):
            points = [(r["iteration"], r["eval"][agent][spec]) for r in evaluated
                      if spec in r["eval"].get(agent, {})]  # fmt: skip
            if not points:
                continue
            offset = (number - (len(agents) - 1) / 2) * shift
            _interval_bars(
                panel,
                [i + offset for i, _ in points],
                [(p["score"], p["score_low"], p["score_high"]) for _, p in points],
                capsize=3,
                markersize=6,
                label=_AGENT_LABELS.get(agent, agent),
                **_AGENT_STYLES.get(agent, _OTHER_STYLE),
            )
        if spec == "solver":
            # A perfect player draws every game against the solver: 0.5 is the best score.
            panel.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
            panel.annotate(
                "perfect play (all draws)",
                (0, 0.5),
                xycoords=("axes fraction", "data"),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize="x-small",
                color="grey",
            )
        games = next((p["games"] for r in evaluated for a in r["eval"].values()
                      for o, p in a.items() if o == spec), None)  # fmt: skip
        panel.set(
            xlabel="iteration",
            ylabel="score (win 1, draw 1/2, loss 0)",
            title=f"vs {spec}" + (f" ({games} games each)" if games else ""),
            ylim=(-0.03, 1.03),
        )
        panel.grid(axis="y", alpha=0.3)
        _steps_axis(panel, records)
    handles, labels = score_axes[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=len(handles))
    _title(figure, records, title)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_episodes_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """A single-player AlphaZero run: losses (left) and every agent's mean return with its
    95% interval (right), against iteration (and environment steps, on top)."""
    plt = _pyplot()
    figure, (losses, returns) = plt.subplots(
        1, 2, figsize=(10, 4.6), constrained_layout=True, sharex=True
    )
    logged = [r for r in records if "loss" in r]
    for name in ("loss", "policy_loss", "value_loss"):
        losses.plot([r["iteration"] for r in logged], [r[name] for r in logged], label=name)
    losses.set(xlabel="iteration", ylabel="loss", title="training loss")
    if logged:
        losses.legend(fontsize="small")
    evaluated = [r for r in records if "eval" in r]
    for agent in dict.fromkeys(a for r in evaluated for a in r["eval"]):
        points = [(r["iteration"], r["eval"][agent]) for r in evaluated if agent in r["eval"]]
        _interval_bars(
            returns,
            [i for i, _ in points],
            [(p["return_mean"], p["return_low"], p["return_high"]) for _, p in points],
            capsize=3,
            label=_AGENT_LABELS.get(agent, agent),
            **_AGENT_STYLES.get(agent, _OTHER_STYLE),
        )
    returns.set(xlabel="iteration", ylabel="episode return", title="evaluation (95% interval)")
    if evaluated:
        returns.legend(fontsize="small")
    for axes in (losses, returns):
        _steps_axis(axes, records)
    _title(figure, records, title)
    figure.savefig(path, dpi=100)
    plt.close(figure)


# ----------------------------------------------------------------------------- seeds


def mean_interval(values) -> tuple[float, float, float]:
    """The mean of independent draws with its 95% interval (Student's t); one value is
    its own interval."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(values))
    if values.size < 2:
        return mean, mean, mean
    half = stats.t.ppf(0.975, values.size - 1) * np.std(values, ddof=1) / np.sqrt(values.size)
    return mean, float(mean - half), float(mean + half)


def seeds_interval(values: Sequence[float]) -> dict[str, Any]:
    """The mean of one number over several seeds, with its 95% interval over the seeds
    (`mean_interval`)."""
    mean, low, high = mean_interval(values)
    return {"mean": mean, "low": low, "high": high, "seeds": len(values)}


def across_seeds(headlines: Sequence[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Each number of several seeds' headlines (a recipe's `headline`) as its mean with a
    95% interval over the seeds (`seeds_interval`)."""
    return {name: seeds_interval([h[name] for h in headlines]) for name in headlines[0]}


def plot_seeds(
    runs: Mapping[int, list[dict[str, Any]]],
    headline: Callable[[dict[str, Any]], dict[str, float]],
    path: str | os.PathLike,
    *,
    title: str,
) -> None:
    """Several seeds' evaluations against environment steps: one panel per number that
    `headline(eval)` gives, with every seed's curve (thin), their mean (thick) and the
    band from the lowest to the highest seed."""
    plt = _pyplot()
    from matplotlib.ticker import EngFormatter

    by_seed = {
        seed: [(r["env_steps"], headline(r["eval"])) for r in records if "eval" in r]
        for seed, records in runs.items()
    }
    names = list(next(iter(by_seed.values()))[0][1]) if all(by_seed.values()) else []
    figure, panels = plt.subplots(
        1, max(len(names), 1), figsize=(4.5 * max(len(names), 1) + 1, 4.2),
        constrained_layout=True, squeeze=False,
    )  # fmt: skip
    # The steps every seed has evaluated at (all of them, as the seeds train together).
    common = sorted(set.intersection(*({s for s, _ in points} for points in by_seed.values())))
    for name, axes in zip(names, panels[0]):
        for seed, points in by_seed.items():
            axes.plot(
                [s for s, _ in points], [h[name] for _, h in points], color="tab:blue",
                alpha=0.3, linewidth=1,
            )  # fmt: skip
        if common:
            table = np.array(
                [[dict(points)[step][name] for step in common] for points in by_seed.values()]
            )
            axes.fill_between(common, table.min(0), table.max(0), color="tab:blue", alpha=0.15,
                              label=f"lowest to highest of {len(by_seed)} seeds")  # fmt: skip
            axes.plot(common, table.mean(0), color="tab:blue", linewidth=2.5, label="mean")
            axes.legend(fontsize="small")
        axes.set(xlabel="environment steps", title=name)
        axes.xaxis.set_major_formatter(EngFormatter(sep=""))
    seeds = sorted(runs)
    figure.suptitle(f"{title}: seeds {seeds[0]}-{seeds[-1]}", fontsize="medium")
    figure.savefig(path, dpi=100)
    plt.close(figure)
