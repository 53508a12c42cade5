"""Data-parallel training over a device mesh: games sharded, parameters replicated.

    mesh = azx.parallel.make_mesh()                      # all devices (all hosts)
    step = jax.jit(azx.parallel.sharded_step(trainer, mesh))
    state = azx.parallel.shard_state(trainer.init(net, key=key), mesh)
    state = step(state, key)

Every device runs self-play and search on its own games with no communication; the
learner adds gradient sums over the `"data"` axis. Randomness is derived per game, so a
run gives the same result on any number of devices (up to float summation order).
Multi-host: call `jax.distributed.initialize()` first; `make_mesh` then spans all hosts.
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from .alphazero import AlphaZero, TrainState


#: The mesh axis over which games (environment rows) are sharded.
AXIS = "data"
# TrainState fields whose leading axis is the game row.
_ROW_FIELDS = ("env_state", "tree", "buffer", "episode_return", "episode_length")


def make_mesh(devices=None) -> Mesh:
    """A one-axis mesh named `"data"` over `devices` (default: every device of every
    host, `jax.devices()`)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device")
    return Mesh(np.array(devices), (AXIS,))


def _check(trainer: AlphaZero, mesh: Mesh) -> int:
    if AXIS not in mesh.axis_names:
        raise ValueError(f"the mesh must have an axis named {AXIS!r}, got {mesh.axis_names}")
    num_devices = mesh.shape[AXIS]
    num_envs = trainer.config.num_envs
    if num_envs % num_devices:
        raise ValueError(
            f"num_envs ({num_envs}) must be divisible by the number of devices on the "
            f"{AXIS!r} axis ({num_devices}); e.g. num_envs="
            f"{max(num_devices, num_envs - num_envs % num_devices)}"
        )
    return num_devices


def state_specs(state: TrainState) -> TrainState:
    """The `PartitionSpec` of every leaf of `state`: game rows over `"data"`, the rest
    replicated."""

    def spec(path, leaf):
        del leaf
        return P(AXIS) if path[0].name in _ROW_FIELDS else P()

    return jax.tree_util.tree_map_with_path(spec, state)


def shard_state(state: TrainState, mesh: Mesh) -> TrainState:
    """Place `state` on `mesh`: game rows split over devices, the rest replicated."""
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec),
        state_specs(state),
        is_leaf=lambda x: isinstance(x, P),
    )
    return jax.device_put(state, shardings)


def sharded_step(trainer: AlphaZero, mesh: Mesh):
    """`trainer.step` as a `shard_map` over `mesh`'s `"data"` axis (jit the result).

    **Raises:** `ValueError` if `num_envs` is not divisible by the number of devices.
    """
    _check(trainer, mesh)
    local = AlphaZero(
        trainer.env, trainer.search, trainer.config, optimiser=trainer.optimiser, axis_name=AXIS
    )

    def step(state: TrainState, key) -> TrainState:
        specs = state_specs(state)
        # check_vma=False: JAX's varying-axes inference rejects comparisons of constants
        # with per-shard data inside pgx's games and the search's loops. Every replicated
        # output (parameters, optimiser state, counters, metrics) is computed from psums
        # over the axis, and the multi-device test checks the result against one device.
        mapped = jax.shard_map(
            local.step, mesh=mesh, in_specs=(specs, P()), out_specs=specs, check_vma=False
        )
        return mapped(state, key)

    return step
