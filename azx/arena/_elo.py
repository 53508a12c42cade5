"""Elo ratings from pairwise match results: maximum-likelihood Bradley-Terry."""

import math
from collections.abc import Mapping

import numpy as np

from .._validate import check_non_negative_number
from ._match import _normal_quantile


#: Elo points per natural-log unit of odds: a 400-point gap means 10:1 expected odds.
_ELO_PER_NAT = 400.0 / math.log(10.0)


def _check_counts(pair, counts) -> tuple[float, float, float]:
    try:
        wins, draws, losses = counts
        values = tuple(float(c) for c in (wins, draws, losses))
    except (TypeError, ValueError):
        raise ValueError(
            f"results[{pair!r}] must be (wins, draws, losses), got {counts!r}"
        ) from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"results[{pair!r}] must hold non-negative finite counts, got {counts!r}")
    return values  # type: ignore[return-value]


def _dominance(names: list[str], scored: np.ndarray) -> tuple[list[str], list[str]] | None:
    """`(winners, losers)`: a split where the losers never scored against the winners.

    `scored[i, j] > 0` when i won or drew at least once against j. The maximum-likelihood
    ratings are finite exactly when no such split exists (the graph of "scored against"
    edges is strongly connected).
    """
    n = len(names)

    def reachable(edges: np.ndarray) -> set[int]:
        seen, frontier = {0}, [0]
        while frontier:
            i = frontier.pop()
            for j in np.flatnonzero(edges[i]):
                if int(j) not in seen:
                    seen.add(int(j))
                    frontier.append(int(j))
        return seen

    for closed, is_losers in ((reachable(scored > 0), True), (reachable(scored.T > 0), False)):
        if len(closed) < n:
            inside = [names[i] for i in sorted(closed)]
            outside = [names[i] for i in range(n) if i not in closed]
            # Players reached along "scored against" edges scored against no one outside.
            return (outside, inside) if is_losers else (inside, outside)
    return None


def elo_ratings(
    results: Mapping[tuple[str, str], tuple[int | float, int | float, int | float]],
    *,
    anchor: str = "random",
    confidence: int | float = 0.95,
    prior_draws: int | float = 0.0,
) -> dict[str, tuple[float, float, float]]:
    """Elo ratings with confidence intervals, from all pairwise results.

    The model is Bradley-Terry on Elo's scale: player i scores against player j with
    probability `1 / (1 + 10 ** ((r_j - r_i) / 400))`, a draw counting as half a win.
    Ratings maximise the likelihood of all results with `anchor` fixed at 0 (Newton's
    method). Intervals are `rating ± z * standard error`, the standard errors from the
    inverse of the observed information (the negative Hessian of the log-likelihood at
    the maximum, anchor held fixed): they measure uncertainty relative to the anchor.

    The maximum exists only when no group of players scored every point against the
    others (the "scored against" graph is strongly connected); otherwise the ratings
    would be infinite and this raises `ValueError` naming the group. `prior_draws > 0`
    adds that many virtual draws to every pair that played, which pulls ratings towards
    each other and keeps them finite (a standard regulariser, as in BayesElo).

    **Arguments:**

    - `results`: `{(name_a, name_b): (wins, draws, losses)}` from name_a's point of view
      (e.g. [`azx.arena.MatchResult.counts`][]). A pair may appear in both orders.
    - `anchor`: the player rated 0 (by convention the uniformly random agent).
    - `confidence`: coverage of the intervals.
    - `prior_draws`: virtual draws added to each pair that played (default none).

    **Returns:** `{name: (rating, low, high)}`; the anchor gets `(0.0, 0.0, 0.0)`.

    **Raises:** `ValueError` for malformed results, an anchor that did not play, players
    not connected to the anchor by games, or results whose maximum likelihood is infinite.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    check_non_negative_number("prior_draws", prior_draws)
    names = sorted({name for pair in results for name in pair})
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} played no games; players: {', '.join(names)}")
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    games = np.zeros((n, n))  # games[i, j]: games between i and j (symmetric)
    score = np.zeros((n, n))  # score[i, j]: points i scored against j
    for pair, counts in results.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1]):
            raise ValueError(f"result keys must be pairs of two different names, got {pair!r}")
        wins, draws, losses = _check_counts(pair, counts)
        i, j = index[pair[0]], index[pair[1]]
        games[i, j] += wins + draws + losses
        games[j, i] += wins + draws + losses
        score[i, j] += wins + draws / 2
        score[j, i] += losses + draws / 2
    played = games > 0
    score = score + prior_draws / 2 * played
    games = games + prior_draws * played

    anchor_index = index[anchor]
    connected = {anchor_index}
    frontier = [anchor_index]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(played[i]):
            if int(j) not in connected:
                connected.add(int(j))
                frontier.append(int(j))
    if len(connected) < n:
        missing = [names[i] for i in range(n) if i not in connected]
        raise ValueError(
            f"no chain of games links {', '.join(missing)} to the anchor {anchor!r}, so "
            "their ratings are undetermined; play matches that connect them"
        )
    split = _dominance(names, score)
    if split is not None:
        winners, losers = split
        raise ValueError(
            f"{', '.join(winners)} won every game against {', '.join(losers)}, so their "
            "maximum-likelihood rating gap is infinite; play more games, or pass "
            "prior_draws > 0 (e.g. 1) for finite, regularised ratings"
        )

    free = [i for i in range(n) if i != anchor_index]
    rating = np.zeros(n)  # natural-log odds units

    def derivatives(rating):
        expected = 1 / (1 + np.exp(rating[None, :] - rating[:, None]))  # P(i scores vs j)
        gradient = np.sum(score - games * expected, axis=1)
        weight = games * expected * (1 - expected)
        hessian = weight - np.diag(weight.sum(axis=1))  # negative semi-definite
        return gradient[free], hessian[np.ix_(free, free)]

    # The log-likelihood is concave; Newton with step halving converges in a few steps.
    for _ in range(200):
        gradient, hessian = derivatives(rating)
        step = np.linalg.solve(hessian, -gradient)
        scale = min(1.0, 2.0 / max(np.max(np.abs(step)), 1e-300))  # at most 2 nats at once
        rating[free] += scale * step
        if np.max(np.abs(step)) < 1e-12:
            break
    _, hessian = derivatives(rating)
    covariance = np.linalg.inv(-hessian)
    z = _normal_quantile(0.5 + confidence / 2)
    ratings = {anchor: (0.0, 0.0, 0.0)}
    for k, i in enumerate(free):
        centre = _ELO_PER_NAT * rating[i]
        half = _ELO_PER_NAT * z * math.sqrt(covariance[k, k])
        ratings[names[i]] = (float(centre), float(centre - half), float(centre + half))
    return {name: ratings[name] for name in names}
