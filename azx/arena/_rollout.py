"""Rollout MCTS: UCT with uniformly random playouts, the classic baseline."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._types import EnvState, PRNGKey
from .._validate import check_non_negative_number, check_positive_int
from ..envs import AbstractEnv
from ._agent import AbstractAgent, _Stateless, _stateless, random_legal


#: Child index of an action that has no node yet.
_UNVISITED = -1
#: The root lives in slot 0.
_ROOT = 0


class _RolloutTree(eqx.Module):
    """Fixed-size per-node arrays for a batch of trees (rebuilt at every move)."""

    children: Int[Array, "batch capacity num_actions"]
    parent: Int[Array, "batch capacity"]
    visits: Int[Array, "batch capacity"]
    value_sum: Float[Array, "batch capacity"]
    """Sum of backed-up returns for the player who moved INTO the node."""
    mover: Int[Array, "batch capacity"]
    """The player who moved into the node (the player to move at its parent)."""
    reward: Float[Array, "batch capacity num_players"]
    """Rewards of the transition into the node."""
    terminal: Bool[Array, "batch capacity"]
    legal_action_mask: Bool[Array, "batch capacity num_actions"]
    state: EnvState
    num_nodes: Int[Array, " batch"]


def _new_tree(env: AbstractEnv, env_state: EnvState, capacity: int) -> _RolloutTree:
    legal = jax.vmap(env.legal_action_mask)(env_state)
    batch_size, num_actions = legal.shape
    shape = (batch_size, capacity)

    def broadcast(x):
        # Every slot starts as a copy of the root; only slot 0 is valid until written.
        return jnp.broadcast_to(x[:, None], (x.shape[0], capacity) + x.shape[1:])

    terminal = jax.vmap(env.terminated)(env_state) | jax.vmap(env.truncated)(env_state)
    return _RolloutTree(
        children=jnp.full(shape + (num_actions,), _UNVISITED, jnp.int32),
        parent=jnp.full(shape, _UNVISITED, jnp.int32),
        visits=jnp.zeros(shape, jnp.int32),
        value_sum=jnp.zeros(shape, jnp.float32),
        mover=jnp.zeros(shape, jnp.int32),
        reward=jnp.zeros(shape + (env.num_players,), jnp.float32),
        terminal=jnp.zeros(shape, jnp.bool_).at[:, _ROOT].set(terminal),
        legal_action_mask=jnp.zeros(shape + (num_actions,), jnp.bool_).at[:, _ROOT].set(legal),
        state=jax.tree.map(broadcast, env_state),
        num_nodes=jnp.ones(batch_size, jnp.int32),
    )


class RolloutMCTSAgent(AbstractAgent):
    """Monte Carlo tree search with random playouts (UCT), batched over games.

    No network: each simulation descends the tree by UCT, adds one node, plays uniformly
    random moves from it to the end of the game, and backs the result up the path. The
    move played is the root's most visited action. The tree is rebuilt at every move.

    Every simulation runs for the whole batch at once: the descent, the playout and the
    backup are `while_loop`s over depth whose bodies are `[batch]`-sized gathers and
    scatters into preallocated `[batch, num_simulations + 1]` arrays.

    Returns are assumed to lie in `[-1, 1]` (as in pgx board games); they are mapped to
    `[0, 1]` for UCT, the range for which `exploration = sqrt(2)` is the textbook choice.
    """

    num_simulations: int = eqx.field(static=True)
    exploration: float = eqx.field(static=True)

    def __init__(self, num_simulations: int, *, exploration: float = math.sqrt(2.0)):
        """**Arguments:**

        - `num_simulations`: playouts per move (each adds at most one node).
        - `exploration`: the UCT constant `c` in `Q + c * sqrt(ln N / n)`.
        """
        check_positive_int("num_simulations", num_simulations)
        check_non_negative_number("exploration", exploration)
        self.num_simulations = num_simulations
        self.exploration = float(exploration)

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        return _stateless(batch_size)

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        if env.num_players not in (1, 2):
            raise ValueError(
                f"RolloutMCTSAgent supports 1- and 2-player games; {env!r} has "
                f"num_players={env.num_players}"
            )
        tree = _new_tree(env, env_state, self.num_simulations + 1)
        tree = jax.lax.fori_loop(
            0,
            self.num_simulations,
            lambda index, tree: self._simulate(env, tree, jax.random.fold_in(key, index)),
            tree,
        )
        rows = jnp.arange(tree.num_nodes.shape[0])
        child = tree.children[:, _ROOT]
        visited = child != _UNVISITED
        safe = jnp.maximum(child, 0)
        visits = jnp.where(visited, tree.visits[rows[:, None], safe], 0)
        q = self._q01(tree, rows[:, None], safe)
        # Most visited child; among equals the better one (q01 < 1 cannot outweigh a visit).
        score = visits.astype(jnp.float32) + 0.5 * jnp.where(visited, q, 0.0)
        score = jnp.where(tree.legal_action_mask[:, _ROOT], score, -1.0)
        return jnp.argmax(score, axis=-1).astype(jnp.int32), agent_state

    @staticmethod
    def _q01(tree: _RolloutTree, rows, node) -> Float[Array, "..."]:
        visits = jnp.maximum(tree.visits[rows, node], 1).astype(jnp.float32)
        return 0.5 * (tree.value_sum[rows, node] / visits + 1.0)

    def _simulate(self, env: AbstractEnv, tree: _RolloutTree, key: PRNGKey) -> _RolloutTree:
        batch_size, capacity = tree.visits.shape
        rows = jnp.arange(batch_size)
        expand_key, step_key, playout_key = jax.random.split(key, 3)

        def untried(node):
            children = tree.children[rows, node]
            return tree.legal_action_mask[rows, node] & (children == _UNVISITED)

        def can_descend(node):
            return ~tree.terminal[rows, node] & ~jnp.any(untried(node), axis=-1)

        # 1. Descend by UCT through fully expanded, non-terminal nodes.
        def descend(node):
            child = tree.children[rows, node]
            safe = jnp.maximum(child, 0)
            child_visits = tree.visits[rows[:, None], safe].astype(jnp.float32)
            parent_visits = tree.visits[rows, node].astype(jnp.float32)
            bonus = jnp.sqrt(jnp.log(parent_visits)[:, None] / jnp.maximum(child_visits, 1.0))
            score = self._q01(tree, rows[:, None], safe) + self.exploration * bonus
            score = jnp.where(child != _UNVISITED, score, -jnp.inf)
            best = jnp.argmax(score, axis=-1)
            return jnp.where(can_descend(node), child[rows, best], node)

        leaf = jax.lax.while_loop(
            lambda node: jnp.any(can_descend(node)),
            descend,
            jnp.full(batch_size, _ROOT, jnp.int32),
        )

        # 2. Expand one untried action of the leaf (unless the leaf is terminal).
        expand = ~tree.terminal[rows, leaf]
        action = random_legal(untried(leaf), key=expand_key)
        parent_state = jax.tree.map(lambda x: x[rows, leaf], tree.state)
        child_state = jax.vmap(env.step)(
            parent_state, action, jax.random.split(step_key, batch_size)
        )
        slot = jnp.where(expand, tree.num_nodes, capacity)  # out of bounds: dropped

        def put(x, value):
            return x.at[rows, slot].set(value, mode="drop")

        child_terminal = jax.vmap(env.terminated)(child_state) | jax.vmap(env.truncated)(
            child_state
        )
        child_reward = jax.vmap(env.rewards)(child_state)
        tree = eqx.tree_at(
            lambda t: (
                t.children,
                t.parent,
                t.mover,
                t.reward,
                t.terminal,
                t.legal_action_mask,
                t.state,
                t.num_nodes,
            ),
            tree,
            (
                tree.children.at[rows, jnp.where(expand, leaf, capacity), action].set(
                    slot, mode="drop"
                ),
                put(tree.parent, leaf),
                put(tree.mover, jax.vmap(env.current_player)(parent_state)),
                put(tree.reward, child_reward),
                put(tree.terminal, child_terminal),
                put(tree.legal_action_mask, jax.vmap(env.legal_action_mask)(child_state)),
                jax.tree.map(put, tree.state, child_state),
                tree.num_nodes + expand.astype(jnp.int32),
            ),
        )
        leaf = jnp.where(expand, slot, leaf)

        # 3. Play uniformly random moves from the new node to the end of the game.
        def playout_live(state):
            return ~jax.vmap(env.terminated)(state) & ~jax.vmap(env.truncated)(state)

        def playout(carry):
            state, returns, index = carry
            live = playout_live(state)
            move_key, next_key = jax.random.split(jax.random.fold_in(playout_key, index))
            legal = jax.vmap(env.legal_action_mask)(state)
            move = random_legal(legal, key=move_key)
            state = jax.vmap(env.step)(state, move, jax.random.split(next_key, batch_size))
            rewards = jax.vmap(env.rewards)(state)
            returns = returns + jnp.where(live[:, None], rewards, 0.0)
            return state, returns, index + 1

        _, returns, _ = jax.lax.while_loop(
            lambda carry: jnp.any(playout_live(carry[0])),
            playout,
            (child_state, jnp.zeros_like(child_reward), jnp.int32(0)),
        )

        # 4. Back up from the leaf to the root, adding each transition's rewards on the way.
        def backup(carry):
            tree, node, returns = carry
            active = node != _UNVISITED
            index = jnp.where(active, node, capacity)
            returns = returns + jnp.where(active[:, None], tree.reward[rows, index], 0.0)
            mover = tree.mover[rows, jnp.maximum(node, 0)]
            mine = jnp.take_along_axis(returns, mover[:, None], axis=1)[:, 0]
            tree = eqx.tree_at(
                lambda t: (t.visits, t.value_sum),
                tree,
                (
                    tree.visits.at[rows, index].add(1, mode="drop"),
                    tree.value_sum.at[rows, index].add(mine, mode="drop"),
                ),
            )
            parent = jnp.where(active, tree.parent[rows, jnp.maximum(node, 0)], _UNVISITED)
            return tree, parent, returns

        tree, _, _ = jax.lax.while_loop(
            lambda carry: jnp.any(carry[1] != _UNVISITED), backup, (tree, leaf, returns)
        )
        return tree
