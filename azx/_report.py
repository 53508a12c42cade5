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

from . import arena
from ._episodes import EvaluationResult
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
            match_key = jax.random.fold_in(key, index)
            result = _play_match(env, agent, opponent, num_games=num_games, key=match_key)
            results[name][spec] = match_record(result)
    return results


def _judged(play: Callable[[bool], dict[str, Any]], greedy: bool, env: AbstractEnv, key):
    """The record `play(False)` gives of the asked player's episodes from `key`; but where
    that player is `greedy` and its episodes could not differ (every `init` gives one
    state, and every episode one return: an interval of nothing), that of its sampled
    counterpart, `play(True)`, saying so."""
    played = play(False)
    if not greedy or played["return_min"] != played["return_max"]:
        return played
    starts = eqx.filter(jax.vmap(env.init)(jax.random.split(key, 4)), eqx.is_array)
    for leaf in jax.tree.leaves(starts):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        if not np.all(np.asarray(leaf) == np.asarray(leaf)[:1]):
            return played
    return play(True) | {"player": "sampled", "greedy_return": played["return_mean"]}


def describe_sampled(record: dict[str, Any]) -> list[str]:
    """The line that says why `record` is the sampled player's; none for a record of the
    player asked for."""
    if "greedy_return" not in record:
        return []
    return [
        f"the greedy player's episodes all start alike and return {record['greedy_return']:.1f}"
        ", an interval of nothing: the line above is the sampled player's"
    ]


_episode_returns = eqx.filter_jit(arena.episode_returns)


def evaluate_episodes(
    env: AbstractEnv,
    agents: dict[str, arena.AbstractAgent],
    *,
    num_episodes: int,
    key,
    on_agent: Callable[[str], None] | None = None,
    sampled: Mapping[str, arena.AbstractAgent] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each agent's episodes of a single-player game ([`azx.arena.episode_returns`][]),
    all from the same key: `{agent_name: record}`, each record the episodes' mean return
    with its 95% interval, lowest and highest return, and how many did not finish.

    `sampled` gives the greedy agents' sampled counterparts by name: where a greedy
    agent's episodes could not differ, its record is its counterpart's, with `"player":
    "sampled"` and the greedy return."""

    def record(agent) -> dict[str, Any]:
        returns, finished = _episode_returns(env, agent, num_games=num_episodes, key=key)
        mean, low, high = mean_interval(returns)
        return {
            "episodes": num_episodes,
            "return_mean": mean,
            "return_low": low,
            "return_high": high,
            "return_min": float(np.min(returns)),
            "return_max": float(np.max(returns)),
            "unfinished": int(np.sum(~np.asarray(finished))),
        }

    results = {}
    for name, agent in agents.items():
        if on_agent is not None:
            on_agent(name)
        other = (sampled or {}).get(name)
        results[name] = _judged(
            lambda sampled: record(other if sampled else agent), other is not None, env, key
        )
    return results


def describe_episodes(record: dict[str, Any]) -> str:
    """A single-player agent's episodes on one line: mean return and its 95% interval."""
    unfinished = f", {record['unfinished']} unfinished" if record["unfinished"] else ""
    return (
        f"return {record['return_mean']:.1f} [{record['return_low']:.1f}, "
        f"{record['return_high']:.1f}] over {record['episodes']} episodes (lowest "
        f"{record['return_min']:.0f}, highest {record['return_max']:.0f}){unfinished}"
    )


def return_record(result: EvaluationResult, *, greedy: bool) -> dict[str, Any]:
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


def evaluate_policy(
    recipe, trainer, state, *, num_episodes: int, key, greedy: bool
) -> dict[str, Any]:
    """A trained policy's episodes as its recipe plays them (`play_episodes` of a
    [`azx.presets.AbstractRecipe`][]: PPO's policy, a single-player MuZero's search),
    summarised as a [`return_record`][].

    Where the greedy player's episodes could not differ (every one starts in the same
    state and returns the same), the record is the sampled player's, with `"player":
    "sampled"` and the greedy return (`greedy_return`)."""

    def record(sampled: bool) -> dict[str, Any]:
        played_greedy = greedy and not sampled
        result = recipe.play_episodes(trainer, state, num_episodes, key=key, greedy=played_greedy)
        return return_record(result, greedy=played_greedy)

    return _judged(record, greedy, trainer.env, key)


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


def _figure(panels: int, size: tuple, **options):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, panels, figsize=size, constrained_layout=True, **options)


def _save(figure, path: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=100)
    plt.close(figure)


def _steps_formatter(axes) -> None:
    from matplotlib.ticker import EngFormatter

    axes.xaxis.set_major_formatter(EngFormatter(sep=""))  # 15k, not 15000


def _steps_axis(axes, records: list[dict[str, Any]]) -> None:
    """A second x axis on top of `axes` (whose x is the iteration): environment steps."""
    trained = [r for r in records if r["iteration"] > 0]
    if not trained:
        return
    per_iteration = trained[-1]["env_steps"] / trained[-1]["iteration"]
    top = axes.secondary_xaxis(
        "top", functions=(lambda i: i * per_iteration, lambda steps: steps / per_iteration)
    )
    _steps_formatter(top)
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


def _losses(axes, records: list[dict[str, Any]]) -> None:
    """An AlphaZero run's training losses against iteration (and steps, on top)."""
    logged = [r for r in records if "loss" in r]
    for name in ("loss", "policy_loss", "value_loss"):
        axes.plot([r["iteration"] for r in logged], [r[name] for r in logged], label=name)
    axes.set(xlabel="iteration", ylabel="loss", title="training loss")
    if logged:
        axes.legend(fontsize="small")
    _steps_axis(axes, records)


def plot_return_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "PPO"
) -> None:
    """A PPO run's returns (training episodes, and evaluations with 95% intervals, the
    untrained policy's at 0 steps), value loss, and policy loss and entropy against
    environment steps."""
    # The value loss (squared returns, in the tens) gets its own panel: beside it the
    # policy loss and entropy (about 1) would be flat lines at zero.
    figure, (returns, value, policy) = _figure(3, (14, 4.5), sharex=True)

    def series(name: str) -> tuple[list[Any], list[Any]]:
        # A policy algorithm's records without this loss leave its panel empty.
        kept = [r for r in records if r.get(name) is not None]
        return [r["env_steps"] for r in kept], [r[name] for r in kept]

    returns.plot(*series("episode_return"), color="tab:blue", alpha=0.6,
                 label="training episodes (mean of each logged call)")  # fmt: skip
    evaluated = [r for r in records if "eval" in r]
    if evaluated:
        _interval_bars(
            returns,
            [r["env_steps"] for r in evaluated],
            [
                (r["eval"]["return_mean"], r["eval"]["return_low"], r["eval"]["return_high"])
                for r in evaluated
            ],  # fmt: skip
            color="tab:orange",
            marker="o",
            capsize=3,
            label="evaluation (95% interval)",
        )
    returns.set(xlabel="environment steps", ylabel="episode return", title="return")
    if records:
        returns.legend(fontsize="small")
    value.plot(*series("value_loss"), color="tab:green")
    value.set(xlabel="environment steps", title="value loss (mean over each logged call)")
    for name in ("policy_loss", "entropy"):
        policy.plot(*series(name), label=name)
    policy.set(xlabel="environment steps", title="policy loss and entropy")
    if any("policy_loss" in r or "entropy" in r for r in records):
        policy.legend(fontsize="small")
    for axes in (returns, value, policy):
        _steps_formatter(axes)
    _title(figure, records, title)
    _save(figure, path)


# Agents told apart by marker and line style as well as colour, and drawn side by side
# (a small shift along x), so that equal scores do not hide one another.
_AGENT_STYLES = {  # label, colour, marker, line style
    "search": ("network + search", "tab:blue", "o", "-"),
    "network": ("network alone (policy argmax)", "tab:orange", "s", "--"),
}


def _agent_style(agent: str) -> dict[str, Any]:
    label, color, marker, linestyle = _AGENT_STYLES.get(agent, (agent, "tab:green", "^", ":"))
    return {"capsize": 3, "label": label, "color": color, "marker": marker, "linestyle": linestyle}


def plot_learning_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """An AlphaZero run at a glance: losses (left), and one panel per evaluation opponent
    with every agent's score and 95% interval (the untrained agent's at iteration 0),
    against iteration (and environment steps, on top)."""
    evaluated = [r for r in records if "eval" in r]
    agents = list(dict.fromkeys(a for r in evaluated for a in r["eval"]))
    opponents = list(dict.fromkeys(o for r in evaluated for a in r["eval"].values() for o in a))
    panels = max(len(opponents), 1)
    figure, axes = _figure(1 + panels, (4.2 * (1 + panels), 4.6), squeeze=False, sharex=True)
    score_axes = axes[0][1:]
    _losses(axes[0][0], records)
    shift = 0.025 * max(max((r["iteration"] for r in records), default=1), 1)
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
                markersize=6,
                **_agent_style(agent),
            )
        if spec == "solver":
            # A perfect player draws every game against the solver: 0.5 is the best score.
            panel.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
            panel.annotate("perfect play (all draws)", (0, 0.5), xycoords=("axes fraction", "data"),
                           xytext=(3, 3), textcoords="offset points", fontsize="x-small",
                           color="grey")  # fmt: skip
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
    _save(figure, path)


def plot_episodes_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """A single-player AlphaZero run: losses (left) and every agent's mean return with its
    95% interval (right), against iteration (and environment steps, on top)."""
    figure, (losses, returns) = _figure(2, (10, 4.6), sharex=True)
    _losses(losses, records)
    evaluated = [r for r in records if "eval" in r]
    for agent in dict.fromkeys(a for r in evaluated for a in r["eval"]):
        points = [(r["iteration"], r["eval"][agent]) for r in evaluated if agent in r["eval"]]
        _interval_bars(
            returns,
            [i for i, _ in points],
            [(p["return_mean"], p["return_low"], p["return_high"]) for _, p in points],
            **_agent_style(agent),
        )
    returns.set(xlabel="iteration", ylabel="episode return", title="evaluation (95% interval)")
    if evaluated:
        returns.legend(fontsize="small")
    _steps_axis(returns, records)
    _title(figure, records, title)
    _save(figure, path)


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


def across_seeds(headlines: Sequence[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Each number of several seeds' headlines (an evaluator's `headline`) as its mean
    with a 95% interval over the seeds (`mean_interval`)."""
    intervals = {name: mean_interval([h[name] for h in headlines]) for name in headlines[0]}
    return {
        name: {"mean": mean, "low": low, "high": high, "seeds": len(headlines)}
        for name, (mean, low, high) in intervals.items()
    }


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
    by_seed = {
        seed: [(r["env_steps"], headline(r["eval"])) for r in records if "eval" in r]
        for seed, records in runs.items()
    }
    names = list(next(iter(by_seed.values()))[0][1]) if all(by_seed.values()) else []
    columns = max(len(names), 1)
    figure, panels = _figure(columns, (4.5 * columns + 1, 4.2), squeeze=False)
    # The steps every seed has evaluated at (all of them, as the seeds train together).
    common = sorted(set.intersection(*({s for s, _ in points} for points in by_seed.values())))
    for name, axes in zip(names, panels[0]):
        for points in by_seed.values():
            axes.plot([s for s, _ in points], [h[name] for _, h in points], color="tab:blue",
                      alpha=0.3, linewidth=1)  # fmt: skip
        if common:
            table = np.array(
                [[dict(points)[step][name] for step in common] for points in by_seed.values()]
            )
            axes.fill_between(common, table.min(0), table.max(0), color="tab:blue", alpha=0.15,
                              label=f"lowest to highest of {len(by_seed)} seeds")  # fmt: skip
            axes.plot(common, table.mean(0), color="tab:blue", linewidth=2.5, label="mean")
            axes.legend(fontsize="small")
        axes.set(xlabel="environment steps", title=name)
        _steps_formatter(axes)
    seeds = sorted(runs)
    figure.suptitle(f"{title}: seeds {seeds[0]}-{seeds[-1]}", fontsize="medium")
    _save(figure, path)
