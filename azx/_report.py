"""Evaluation results of a run as records and lines of text, and its pictures.

The records are what `metrics.jsonl` and `evals/` hold; the pictures are the run's
`learning_curve.png`.
"""

import math
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
    on_games: Callable[[str, str, arena.MatchResult], None] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Play every agent against every opponent: a spec (see [`azx.arena.opponent`][]), or
    a name with its agent. `on_match(agent_name, opponent_name)`, if given, is called
    before each match (to show progress); `on_games(agent_name, opponent_name, match)`,
    where given, receives each match with its actions and keys kept (the same games).

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
            if on_games is None:
                result = _play_match(env, agent, opponent, num_games=num_games, key=match_key)
            else:
                result = kept_in_full(
                    lambda keep, agent=agent, opponent=opponent, match_key=match_key: _play_match(
                        env, agent, opponent, num_games=num_games, key=match_key,
                        keep_actions=keep,
                    )
                )  # fmt: skip
                on_games(name, spec, result)
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
_play_episodes = eqx.filter_jit(arena.play_episodes)


def kept_in_full(play: Callable[[int], Any]) -> Any:
    """`play(keep_actions)`'s games ([`azx.arena.play_match`][]'s or
    [`azx.arena.play_episodes`][]'s) with every move kept: played again with room for the
    longest where it did not fit (the same games: the keys are the same)."""
    kept = 256
    while True:
        result = play(kept)
        longest = int(np.max(np.asarray(result.num_moves)))
        if longest <= kept:
            return result
        kept = 2 ** math.ceil(math.log2(longest))


def evaluate_episodes(
    env: AbstractEnv,
    agents: dict[str, arena.AbstractAgent],
    *,
    num_episodes: int,
    key,
    on_agent: Callable[[str], None] | None = None,
    sampled: Mapping[str, arena.AbstractAgent] | None = None,
    on_episodes: Callable[[str, arena.Episodes], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each agent's episodes of a single-player game ([`azx.arena.episode_returns`][]),
    all from the same key: `{agent_name: record}`, each record the episodes' mean return
    with its 95% interval, lowest and highest return, and how many did not finish.

    `sampled` gives the greedy agents' sampled counterparts by name: where a greedy
    agent's episodes could not differ, its record is its counterpart's, with `"player":
    "sampled"` and the greedy return. `on_episodes(agent_name, episodes)`, where given,
    receives the episodes each record counts, their actions and keys kept
    ([`azx.arena.play_episodes`][]: the same episodes)."""

    def record(agent, kept: dict[bool, arena.Episodes], sampled: bool) -> dict[str, Any]:
        if on_episodes is None:
            returns, finished = _episode_returns(env, agent, num_games=num_episodes, key=key)
        else:
            kept[sampled] = episodes = kept_in_full(
                lambda keep: _play_episodes(
                    env, agent, num_games=num_episodes, key=key, keep_actions=keep
                )
            )
            returns, finished = episodes.returns, episodes.finished
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
        kept: dict[bool, arena.Episodes] = {}
        results[name] = _judged(
            lambda sampled: record(other if sampled else agent, kept, sampled),
            other is not None,
            env,
            key,
        )
        if on_episodes is not None:
            on_episodes(name, kept[results[name].get("player") == "sampled"])
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


def _figure(panels: int, **options):
    """A figure of `panels` side by side (`options` for `plt.subplots`), each with
    environment steps along x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    figure, axes = plt.subplots(1, panels, layout="constrained", squeeze=False, **options)
    for one in axes[0]:
        one.set(xlabel="environment steps")
        one.xaxis.set_major_formatter(EngFormatter(sep=""))  # 15k, not 15000
    return figure, axes[0]


def _save(figure, path: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=100)
    plt.close(figure)


Interval = tuple[float, float, float]
"""An estimate with the low and high ends of its 95% interval."""

# Series told apart by marker and line style as well as colour, and drawn side by side (a
# small shift along x), so that equal estimates do not hide one another.
_STYLES = {  # label, colour, marker, line style
    "search": ("network + search", "tab:blue", "o", "-"),
    "network": ("network alone (policy argmax)", "tab:orange", "s", "--"),
    "evaluation": ("evaluation (95% interval)", "tab:orange", "o", ""),
}


def plot_curve(
    records: list[dict[str, Any]],
    path: str | os.PathLike,
    *,
    title: str,
    lines: Sequence[tuple[str, Sequence[str]]],
    points: Callable[[dict[str, Any]], dict[str, dict[str, Interval]]],
    measure: str,
    limits: tuple[float, float] | None = None,
    references: Mapping[str, tuple[float, str]] = {},  # noqa: B006 (read only)
) -> None:
    """A run's learning curve against environment steps, every panel side by side.

    `lines` gives panels of the records' own fields as lines (`(panel, fields)`: losses,
    training returns). `points(record["eval"])` gives each evaluation's estimates with
    their 95% intervals (`{panel: {series: Interval}}`), drawn as points with bars on
    panels whose y axis is `measure` (within `limits`); a panel named in both shows both.
    `references` draws a labelled horizontal line on a panel (`{panel: (y, label)}`)."""
    evaluated = [(r["env_steps"], points(r["eval"])) for r in records if "eval" in r]
    scored = list(dict.fromkeys(panel for _, by_panel in evaluated for panel in by_panel))
    names = list(dict.fromkeys([panel for panel, _ in lines] + scored))
    figure, axes = _figure(len(names), figsize=(4.4 * len(names) + 0.4, 4.4), sharex=True)
    panels = dict(zip(names, axes))
    for panel, fields in lines:
        for field in fields:
            kept = [r for r in records if r.get(field) is not None]
            panels[panel].plot(
                [r["env_steps"] for r in kept], [r[field] for r in kept], label=field
            )
    shift = 0.02 * max((r["env_steps"] for r in records), default=1)
    for panel in scored:
        series = list(
            dict.fromkeys(s for _, by_panel in evaluated for s in by_panel.get(panel, {}))
        )
        for number, name in enumerate(series):
            at = [(x, by_panel[panel][name]) for x, by_panel in evaluated
                  if name in by_panel.get(panel, {})]  # fmt: skip
            label, color, marker, linestyle = _STYLES.get(name, (name, "tab:green", "^", ":"))
            offset = (number - (len(series) - 1) / 2) * shift
            estimate, low, high = (np.asarray(column) for column in zip(*(i for _, i in at)))
            # An interval's end can miss its estimate by a rounding error (Wilson's interval
            # at a score of 0 or 1); matplotlib refuses negative bar lengths.
            panels[panel].errorbar(
                [x + offset for x, _ in at], estimate,
                yerr=[np.maximum(estimate - low, 0.0), np.maximum(high - estimate, 0.0)],
                capsize=3, label=label, color=color, marker=marker, linestyle=linestyle,
            )  # fmt: skip
        panels[panel].set(ylabel=measure, ylim=limits)
        panels[panel].grid(axis="y", alpha=0.3)
    for panel, (y, label) in references.items():
        if panel in panels:
            panels[panel].axhline(y, color="grey", linewidth=0.8, linestyle=":", label=label)
    for panel, one in panels.items():
        one.set(title=panel)
        if one.get_legend_handles_labels()[0]:
            one.legend(fontsize="small")
    if records:
        last, seconds = records[-1], records[-1].get("elapsed_s")
        took = "" if seconds is None else (
            f", {seconds / 60:.1f} min" if seconds >= 120 else f", {seconds:.0f} s"
        )  # fmt: skip
        figure.suptitle(
            f"{title}: {last['iteration']} iterations, {last['env_steps']:,} environment steps"
            f"{took} (compile and evaluations included)",
            fontsize="medium",
        )
    _save(figure, path)


_LOSSES = (("training loss", ("loss", "policy_loss", "value_loss")),)


def _match_points(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Interval]]:
    by_panel: dict[str, dict[str, Interval]] = {}
    for agent, by_spec in results.items():
        for spec, record in by_spec.items():
            score = (record["score"], record["score_low"], record["score_high"])
            by_panel.setdefault(f"vs {spec}", {})[agent] = score
    return by_panel


def plot_learning_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """An AlphaZero run at a glance: its losses, and a panel per evaluation opponent with
    every agent's score and 95% interval (the untrained agent's at 0 steps), against
    environment steps."""
    plot_curve(
        records, path, title=title, lines=_LOSSES, points=_match_points,
        measure="score (win 1, draw 1/2, loss 0)", limits=(-0.03, 1.03),
        # A perfect player draws every game against the solver: 0.5 is the best score.
        references={"vs solver": (0.5, "perfect play (all draws)")},
    )  # fmt: skip


def plot_episodes_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "AlphaZero"
) -> None:
    """A single-player AlphaZero run: its losses and every agent's mean return with its
    95% interval, against environment steps."""

    def points(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Interval]]:
        return {"evaluation": {agent: (r["return_mean"], r["return_low"], r["return_high"])
                               for agent, r in results.items()}}  # fmt: skip

    plot_curve(records, path, title=title, lines=_LOSSES, points=points, measure="episode return")


def plot_return_curve(
    records: list[dict[str, Any]], path: str | os.PathLike, *, title: str = "PPO"
) -> None:
    """A policy's run (PPO): the training episodes' returns with the evaluations' (95%
    intervals, the untrained policy's at 0 steps), the value loss, and the policy loss and
    entropy, against environment steps."""

    def points(record: dict[str, Any]) -> dict[str, dict[str, Interval]]:
        return {"return": {"evaluation": (record["return_mean"], record["return_low"],
                                          record["return_high"])}}  # fmt: skip

    # The value loss (squared returns, in the tens) gets its own panel: beside it the
    # policy loss and entropy (about 1) would be flat lines at zero.
    lines = (
        ("return", ("episode_return",)),
        ("value loss", ("value_loss",)),
        ("policy loss and entropy", ("policy_loss", "entropy")),
    )
    plot_curve(records, path, title=title, lines=lines, points=points, measure="episode return")


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
    figure, panels = _figure(columns, figsize=(4.5 * columns + 1, 4.2))
    # The steps every seed has evaluated at (all of them, as the seeds train together).
    common = sorted(set.intersection(*({s for s, _ in points} for points in by_seed.values())))
    for name, axes in zip(names, panels):
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
        axes.set(title=name)
    seeds = sorted(runs)
    figure.suptitle(f"{title}: seeds {seeds[0]}-{seeds[-1]}", fontsize="medium")
    _save(figure, path)
