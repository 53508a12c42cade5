"""`azx play --explain`: the explorer's analysis of each of the agent's moves, as text."""

from collections.abc import Callable
from typing import Any

from .. import arena
from ._session import Moves, analyse


#: Moves listed per explanation, the most visited first.
SHOWN_MOVES = 10


def explain_move(env, agent, state, key, write: Callable[[str], None]) -> int:
    """Search the batched (batch of one) `state` with `key` from an empty tree, as
    `agent(env, agent.init(env, 1), state, key=key)` does, print why the move is played
    (the network's prior and value, the search's visits, visit share and Q per move, the
    principal variation) and return the move."""
    if not isinstance(agent, arena.SearchAgent):
        raise ValueError(
            "--explain reads an AlphaZero network's prior and value; this run's agent is "
            f"a {type(agent).__name__}"
        )
    moves = Moves(env)
    analysis = analyse(agent, env, state, key, moves)
    for line in explanation(analysis):
        write(line)
    return analysis["action"]


def explanation(analysis: dict[str, Any]) -> list[str]:
    """The lines that `explain_move` prints for `analysis` (what `analyse` returns)."""
    visits = analysis["visits"]
    legal = analysis["legal"]
    if visits is not None:
        order = sorted(legal, key=lambda a: (-visits[a], -analysis["prior"][a]))
    else:
        order = sorted(legal, key=lambda a: -analysis["policy"][a])
    lines = [
        f"  network value {analysis['value']:+.3f}, search value {analysis['root_value']:+.3f} "
        f"({analysis['simulations']} simulations); principal variation: "
        + " ".join(analysis["pv_names"]),
        f"  {'move':<6}{'prior':>8}{'visits':>8}{'share':>8}{'Q':>8}{'policy':>8}",
    ]
    for action in order[:SHOWN_MOVES]:
        q = None if analysis["q"] is None else analysis["q"][action]
        row = (
            f"  {analysis['names'][action]:<6}{analysis['prior'][action]:>8.1%}"
            + (
                f"{visits[action]:>8d}{analysis['visit_share'][action]:>8.1%}"
                if visits
                else " " * 16
            )
            + (f"{q:>+8.3f}" if q is not None else f"{'-':>8}")
            + f"{analysis['policy'][action]:>8.1%}"
        )
        lines.append(row + ("  <- played" if action == analysis["action"] else ""))
    if len(order) > SHOWN_MOVES:
        lines.append(f"  ... and {len(order) - SHOWN_MOVES} more legal moves")
    if analysis["chance"]:
        likely = sorted(analysis["chance"], key=lambda o: -o["probability"])[:SHOWN_MOVES]
        outcomes = ", ".join(f"{o['outcome']} {o['probability']:.1%}" for o in likely)
        lines.append(f"  chance after {analysis['action_name']}: {outcomes}")
    return lines
