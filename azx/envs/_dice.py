"""A small dice game whose exact expectimax solution is known (`dice_race_q`): what
Stochastic MuZero's dice preset trains on and is judged by, made by name as
`azx.envs.make("dice_race")`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._validate import check_positive_int
from ._chance import AbstractChanceEnv, validate_outcome


#: Squares a roll moves (outcome k moves ROLL_ADVANCES[k]) and their probabilities.
ROLL_ADVANCES = (0, 2, 4)
ROLL_PROBABILITIES = (0.5, 0.25, 0.25)
WALK, ROLL = 0, 1


class DiceRaceState(eqx.Module):
    position: Int[Array, ""]
    moves: Int[Array, ""]
    rewards: Float[Array, "1"]
    terminated: Bool[Array, ""]


class DiceRaceAfterstate(eqx.Module):
    state: DiceRaceState
    action: Int[Array, ""]


class DiceRace(AbstractChanceEnv):
    """A one-player race to square `goal` in at most `moves` moves: walk one square
    (action 0), or roll a die (action 1) that moves 0, 2 or 4 squares with probabilities
    1/2, 1/4, 1/4. Reaching the goal pays 1; running out of moves pays nothing. Whether
    to gamble depends on the squares left and the moves left, and the exact solution
    ([`azx.envs.dice_race_q`][]) says which move is best where. The observation is
    thermometer codes of the position and of the moves taken."""

    name = "dice_race"

    goal: int = eqx.field(static=True)
    moves: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    num_outcomes: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, goal: int = 10, moves: int = 6):
        check_positive_int("goal", goal)
        check_positive_int("moves", moves)
        self.goal, self.moves = goal, moves
        self.num_actions, self.num_players, self.num_outcomes = 2, 1, len(ROLL_ADVANCES)
        self.observation_shape = (goal + moves,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key):
        del key  # every race starts at square 0
        return DiceRaceState(jnp.int32(0), jnp.int32(0), jnp.zeros(1), jnp.bool_(False))

    def afterstate(self, state, action):
        return DiceRaceAfterstate(state, jnp.asarray(action, jnp.int32))

    def has_chance(self, afterstate):
        return (afterstate.action == ROLL) & ~afterstate.state.terminated

    def chance_probabilities(self, afterstate):
        roll = jnp.asarray(ROLL_PROBABILITIES, jnp.float32)
        one = jax.nn.one_hot(0, self.num_outcomes, dtype=jnp.float32)
        return jnp.where(self.has_chance(afterstate), roll, one)

    def apply_outcome(self, afterstate, outcome):
        outcome, valid = validate_outcome(outcome, self.num_outcomes)
        state = afterstate.state
        over = state.terminated
        rolled = jnp.asarray(ROLL_ADVANCES, jnp.int32)[outcome]
        advance = jnp.where(afterstate.action == ROLL, rolled, 1)
        position = jnp.where(over, state.position, state.position + advance)
        moves = jnp.where(over, state.moves, state.moves + 1)
        won = (position >= self.goal) & ~over
        reward = jnp.where(valid, jnp.where(won, 1.0, 0.0), jnp.nan)[None].astype(jnp.float32)
        return DiceRaceState(position, moves, reward, over | won | (moves >= self.moves))

    def step(self, state, action, key):
        after = self.afterstate(state, action)
        return self.apply_outcome(after, self.sample_outcome(after, key))

    def observation(self, state):
        squares = (state.position >= jnp.arange(1, self.goal + 1)).astype(jnp.float32)
        moves = (state.moves >= jnp.arange(1, self.moves + 1)).astype(jnp.float32)
        return jnp.concatenate([squares, moves])

    def legal_action_mask(self, state):
        return jnp.ones(2, bool)

    def rewards(self, state):
        return state.rewards

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return jnp.bool_(False)

    def current_player(self, state):
        return jnp.int32(0)


def dice_race_q(env: DiceRace) -> np.ndarray:
    """The exact expectimax value of each move (walk, roll) in every position of `env`
    that is not over: `q[position, moves_taken, action]`, the chance of reaching the goal
    in time with that move and best play after it."""
    value = np.zeros((env.goal + max(ROLL_ADVANCES) + 1, env.moves + 1))
    q = np.zeros((env.goal, env.moves, 2))
    for moves in reversed(range(env.moves)):
        for position in range(env.goal):
            for action, outcomes in (
                (WALK, ((1, 1.0),)),
                (ROLL, tuple(zip(ROLL_ADVANCES, ROLL_PROBABILITIES, strict=True))),
            ):
                q[position, moves, action] = sum(
                    probability
                    * (
                        1.0
                        if position + advance >= env.goal
                        else value[position + advance, moves + 1]
                    )
                    for advance, probability in outcomes
                )
            value[position, moves] = q[position, moves].max()
    return q
