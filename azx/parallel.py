"""Data-parallel training over a device mesh: environment rows sharded, parameters replicated.

    mesh = azx.parallel.make_mesh()                      # all devices (all hosts)
    step = jax.jit(azx.parallel.sharded_step(trainer, mesh))
    state = azx.parallel.shard_state(trainer.init(net, key=key), mesh)
    state = step(state, key)

Works for any [`azx.AbstractTrainer`][] ([`azx.alphazero.AlphaZero`][], [`azx.ppo.PPO`][]):
the state's class names its per-environment fields (`row_fields`), which are split over
the devices; everything else is replicated. Every device steps its own environments with no
communication; the trainer adds gradients, counts and metrics over the `"data"` axis.
Randomness is derived per row, so a run gives the same result on any number of devices (up
to float summation order). Multi-host: call `jax.distributed.initialize()` first;
`make_mesh` then spans all hosts.
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ._trainer import AbstractTrainer, AbstractTrainState


#: The mesh axis over which environment rows are sharded.
AXIS = "data"


def make_mesh(devices=None) -> Mesh:
    """A one-axis mesh named `"data"` over `devices` (default: every device of every
    host, `jax.devices()`)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device")
    return Mesh(np.array(devices), (AXIS,))


def _check(trainer: AbstractTrainer, mesh: Mesh) -> None:
    if AXIS not in mesh.axis_names:
        raise ValueError(f"the mesh must have an axis named {AXIS!r}, got {mesh.axis_names}")
    trainer.check_shards(mesh.shape[AXIS])


def state_specs(state: AbstractTrainState) -> AbstractTrainState:
    """The `PartitionSpec` of every leaf of `state`: the fields in `state.row_fields` split
    over `"data"` along their first axis, the rest replicated."""
    rows = type(state).row_fields

    def spec(path, leaf):
        del leaf
        return P(AXIS) if path[0].name in rows else P()

    return jax.tree_util.tree_map_with_path(spec, state)


def shard_state(state: AbstractTrainState, mesh: Mesh) -> AbstractTrainState:
    """Place `state` on `mesh`: environment rows split over devices, the rest replicated."""
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec),
        state_specs(state),
        is_leaf=lambda x: isinstance(x, P),
    )
    return jax.device_put(state, shardings)


def sharded_step(trainer: AbstractTrainer, mesh: Mesh):
    """`trainer.step` as a `shard_map` over `mesh`'s `"data"` axis (jit the result).

    **Raises:** `ValueError` if the trainer's rows do not split evenly over the devices.
    """
    _check(trainer, mesh)
    local = trainer.with_axis_name(AXIS)

    def step(state, key):
        specs = state_specs(state)
        # check_vma=False: JAX's varying-axes inference rejects comparisons of constants
        # with per-shard data inside the environments and the search's loops. Every
        # replicated output (parameters, optimiser state, counters, metrics) is computed
        # from sums over the axis, and the multi-device tests check the result against
        # one device.
        mapped = jax.shard_map(
            local.step, mesh=mesh, in_specs=(specs, P()), out_specs=specs, check_vma=False
        )
        return mapped(state, key)

    return step
