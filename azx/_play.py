"""A person against a trained agent, in the terminal (`azx play`).

Boards are drawn from the observation, which pgx gives from the mover's side (plane 0:
the mover's pieces, plane 1: the opponent's); `X` is whoever moved first. Moves are typed
as a column (connect four), a cell number (tic-tac-toe) or a coordinate like `d3`
(othello and other boards), `pass` where passing is an action.
"""

import string
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .envs import AbstractEnv, unwrap


class _Board:
    """How moves of one game are written and read."""

    def __init__(self, env: AbstractEnv):
        shape = env.observation_shape
        if len(shape) != 3 or shape[-1] < 2:
            raise ValueError(
                f"azx play draws boards from [rows, cols, planes] observations; "
                f"{env!r} has shape {shape}"
            )
        self.rows, self.cols = shape[0], shape[1]
        self.num_actions = env.num_actions
        cells = self.rows * self.cols
        if self.num_actions == self.cols:
            self.kind = "column"
        elif self.num_actions == cells and cells <= 9:
            self.kind = "cell"
        elif self.num_actions in (cells, cells + 1):
            self.kind = "coordinate"
        else:
            raise ValueError(f"azx play cannot map {self.num_actions} actions onto a {shape} board")

    def name(self, action: int) -> str:
        if self.kind in ("column", "cell"):
            return str(action + 1)
        if action == self.rows * self.cols:
            return "pass"
        row, col = divmod(action, self.cols)
        return f"{string.ascii_lowercase[col]}{row + 1}"

    def parse(self, text: str) -> int | None:
        text = text.strip().lower()
        if self.kind in ("column", "cell"):
            return int(text) - 1 if text.isdigit() else None
        if text == "pass":
            return self.rows * self.cols
        if len(text) >= 2 and text[0] in string.ascii_lowercase and text[1:].isdigit():
            col, row = string.ascii_lowercase.index(text[0]), int(text[1:]) - 1
            if 0 <= col < self.cols and 0 <= row < self.rows:
                return row * self.cols + col
        return None

    def prompt(self) -> str:
        return {
            "column": f"column (1-{self.cols})",
            "cell": f"cell (1-{self.rows * self.cols})",
            "coordinate": "square like a1"
            + (" or pass" if self.num_actions > self.rows * self.cols else ""),
        }[self.kind]

    def draw(self, observation: np.ndarray, mover_is_x: bool, legal: np.ndarray) -> str:
        mine, theirs = observation[..., 0], observation[..., 1]
        x, o = (mine, theirs) if mover_is_x else (theirs, mine)
        lines = []
        if self.kind == "coordinate":
            lines.append("   " + " ".join(string.ascii_lowercase[: self.cols]))
        for row in range(self.rows):
            cells = []
            for col in range(self.cols):
                index = row * self.cols + col
                if x[row, col]:
                    cells.append("X")
                elif o[row, col]:
                    cells.append("O")
                elif self.kind == "cell":
                    cells.append(str(index + 1))
                elif self.kind == "coordinate" and legal[index]:
                    cells.append("*")
                else:
                    cells.append(".")
            prefix = f"{row + 1:2d} " if self.kind == "coordinate" else " "
            lines.append(prefix + " ".join(cells))
        if self.kind == "column":
            lines.append(" " + " ".join(str(c + 1) for c in range(self.cols)))
        return "\n".join(lines)


def play(
    env: AbstractEnv,
    agent,
    *,
    human_first: bool,
    seed: int,
    read: Callable[[str], str],
    write: Callable[[str], None],
    explain: Callable | None = None,
) -> int:
    """Play one game; `read(prompt)` returns the person's line (raises `EOFError` when
    input ends). With `explain(env, agent, state, key, write) -> action` (`azx play
    --explain`: `azx.explore.explain_move`), each of the agent's moves is chosen and
    printed with its analysis. **Returns:** +1 if the
    person won, 0 for a draw, -1 for a loss."""
    # A wrapper's own observation (a flat board and legal moves, for `ObserveLegalMoves`)
    # is drawn from the game it wraps.
    board_env = unwrap(env)
    board = _Board(board_env)
    init_key, game_key = jax.random.split(jax.random.key(seed))
    state = jax.vmap(env.init)(init_key[None])
    agent_state = agent.init(env, 1)
    act = eqx.filter_jit(
        lambda agent, agent_state, state, key: agent(env, agent_state, state, key=key)
    )
    observe = eqx.filter_jit(lambda agent, *args: agent.observe(*args))
    step = eqx.filter_jit(jax.vmap(env.step))
    first = int(env.current_player(jax.tree.map(lambda x: x[0], state)))
    human = first if human_first else 1 - first
    write(f"You are {'X' if human_first else 'O'}; X moves first. Type 'quit' to stop.")
    move = 0
    thought = False
    while True:
        one = jax.tree.map(lambda x: x[0], state)
        legal = np.asarray(env.legal_action_mask(one))
        player = int(env.current_player(one))
        write(board.draw(np.asarray(board_env.observation(one)), player == first, legal) + "\n")
        if bool(env.terminated(one)) or bool(env.truncated(one)):
            break
        key = jax.random.fold_in(game_key, move)
        if player == human:
            while True:
                text = read(f"your move, {board.prompt()}: ")
                if text.strip().lower() in ("q", "quit", "exit"):
                    write("stopped.")
                    return 0
                action = board.parse(text)
                if action is not None and 0 <= action < board.num_actions and legal[action]:
                    break
                choices = " ".join(board.name(int(a)) for a in np.flatnonzero(legal))
                write(f"{text.strip()!r} is not a legal move; legal: {choices}")
        else:
            # The first search compiles (seconds to tens of seconds): say so, not a silence.
            write("azx is thinking…" + ("" if thought else " (compiling its search first)"))
            thought = True
            if explain is not None:
                action = explain(env, agent, state, key, write)
            else:
                actions, agent_state = act(agent, agent_state, state, key)
                action = int(actions[0])
            write(f"azx plays {board.name(action)}")
        action_array = jnp.asarray([action], jnp.int32)
        state = step(state, action_array, jax.random.split(key, 1))
        done = jax.vmap(env.terminated)(state) | jax.vmap(env.truncated)(state)
        agent_state = observe(agent, agent_state, action_array, done)
        move += 1
    rewards = np.asarray(env.rewards(jax.tree.map(lambda x: x[0], state)))
    # pgx gives the final reward on the last step; compare the players' final rewards.
    outcome = int(np.sign(rewards[human] - rewards[1 - human]))
    write({1: "You win!", 0: "Draw.", -1: "azx wins."}[outcome])
    return outcome
