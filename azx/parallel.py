"""Data-parallel training over a device mesh: environment rows sharded, parameters replicated.

    mesh = azx.parallel.make_mesh()                      # all devices (all hosts)
    step = jax.jit(azx.parallel.sharded_step(trainer, mesh))
    state = azx.parallel.shard_state(trainer.init(net, key=key), mesh)
    state = step(state, key)

`sharded_train` does the same for `trainer.train_and_record` (many steps in one scan);
`azx train` uses it whenever JAX sees more than one device.

Works for any [`azx.AbstractTrainer`][] ([`azx.alphazero.AlphaZero`][], [`azx.ppo.PPO`][]):
the state's class names its per-environment fields (`row_fields`), which are split over
the devices; everything else is replicated. Every device steps its own environments with no
communication; the trainer adds gradients, counts and metrics over the `"data"` axis.
Randomness is derived per row, so a run gives the same result on any number of devices (up
to float summation order).

Several processes (hosts): call `jax.distributed.initialize()` first, then run the same
program in every process; `make_mesh` spans the devices of all of them. Every process
builds the same initial state (the same seed) and `shard_state` takes from it the rows of
its own devices; `gather` gives every process the whole state back, e.g. to evaluate on
one. [`azx.checkpoint.Checkpointer`][] saves and restores such a state when every process
calls it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
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


def over_seeds(fn, *, vmap: bool = True):
    """`fn(state, *args)` over the leading seeds axis of `state` (several seeds' states
    stacked, as [`azx.presets.Preset.build_seeds`][] gives them), in one program: with
    `vmap`, every seed at once (`eqx.filter_vmap`; the other arguments shared); otherwise
    one seed after another (`jax.lax.map`). Either way the results have the seeds axis.

    Batching seeds changes the order in which XLA sums, so vmapped seeds equal their own
    runs within float tolerance; mapped one after another, each seed runs its own run's
    program and equals it bit for bit. Which is faster depends on the algorithm and the
    platform ([`azx.presets.Preset.vmaps_seeds`][]).
    """

    def vmapped(state, *args):
        return eqx.filter_vmap(lambda state: fn(state, *args))(state)

    def mapped(state, *args):
        arrays, static = eqx.partition(state, eqx.is_array)
        static_out = []

        def one(seed_arrays):
            out_arrays, out_static = eqx.partition(
                fn(eqx.combine(seed_arrays, static), *args), eqx.is_array
            )
            static_out.append(out_static)
            return out_arrays

        out = jax.lax.map(one, arrays)
        return eqx.combine(out, static_out[-1])

    return vmapped if vmap else mapped


def _check_axis(mesh: Mesh) -> None:
    if AXIS not in mesh.axis_names:
        raise ValueError(f"the mesh must have an axis named {AXIS!r}, got {mesh.axis_names}")


def _check(trainer: AbstractTrainer, mesh: Mesh) -> None:
    _check_axis(mesh)
    trainer.check_shards(mesh.shape[AXIS])


def state_specs(state: AbstractTrainState, *, seeds: bool = False) -> AbstractTrainState:
    """The `PartitionSpec` of every leaf of `state`: the fields in `state.row_fields` split
    over `"data"` along their first axis, the rest replicated. With `seeds`, `state` is
    several seeds' states stacked (`azx.presets.Preset.build_seeds`): the rows are the
    second axis, and every seed's rows are split the same way."""
    rows = type(state).row_fields
    split = P(None, AXIS) if seeds else P(AXIS)

    def spec(path, leaf):
        del leaf
        return split if path[0].name in rows else P()

    return jax.tree_util.tree_map_with_path(spec, state)


def shard_state(
    state: AbstractTrainState, mesh: Mesh, *, seeds: bool = False
) -> AbstractTrainState:
    """Place `state` on `mesh`: environment rows split over devices, the rest replicated
    (with `seeds`, stacked seeds' states: see [`state_specs`][azx.parallel.state_specs]).

    `state` is host-local and whole (e.g. `trainer.init(net, key=key)`). With several
    processes, every process passes the same state (the same seed gives the same one) and
    contributes the slices its own devices hold.

    **Raises:** `ValueError` if the mesh has no `"data"` axis, or if a sharded field's
    rows do not split evenly over its devices.
    """
    _check_axis(mesh)
    specs = state_specs(state, seeds=seeds)
    devices = mesh.shape[AXIS]
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if path[0].name in type(state).row_fields and np.shape(leaf)[int(seeds)] % devices:
            raise ValueError(
                f"state{jax.tree_util.keystr(path)} has {np.shape(leaf)[int(seeds)]} rows, which "
                f"{devices} devices cannot split evenly: the rows (num_envs) must be "
                f"divisible by the number of devices"
            )
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec), specs, is_leaf=lambda x: isinstance(x, P)
    )
    if jax.process_count() == 1:
        return jax.device_put(state, shardings)
    return jax.tree.map(_keys_as_data(_place), state, shardings)


def _keys_as_data(move):
    """`move(leaf, *rest)`, applied to a typed PRNG key's raw data and the key rebuilt."""

    def apply(leaf, *rest):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            data = move(jax.random.key_data(leaf), *rest)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
        return move(leaf, *rest)

    return apply


def _place(leaf, sharding: NamedSharding) -> jax.Array:
    # `device_put` onto a mesh that spans other processes' devices is refused: each
    # process builds the global array from the slices of its own devices.
    value = np.asarray(leaf)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def gather(state: AbstractTrainState) -> AbstractTrainState:
    """A whole, host-local copy of a state placed by [`azx.parallel.shard_state`][] (or
    returned by a sharded step), on this process's first device: for evaluating, playing
    or inspecting on one process.

    With several processes, every process must call it (each receives the rows that the
    other processes' devices hold), and each gets the whole state.
    """
    device = jax.local_devices()[0]

    def local(leaf):
        if not isinstance(leaf, jax.Array):
            return leaf
        if not leaf.is_fully_addressable:
            leaf = multihost_utils.process_allgather(leaf, tiled=True)
        return jax.device_put(leaf, device)

    return jax.tree.map(_keys_as_data(local), state)


def sync(name: str) -> None:
    """Wait until every process reaches the point called `name` (with one process, return
    at once): before one process reads what another writes, say."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


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


def sharded_train(
    trainer: AbstractTrainer, mesh: Mesh, *, seeds: bool = False, vmap_seeds: bool = True
):
    """`trainer.train_and_record` as a `shard_map` over `mesh`'s `"data"` axis:
    `train(state, num_steps) -> (state, history)`, `num_steps` steps in one `lax.scan`
    with every step's metrics stacked (replicated). Jit it with `num_steps` static, e.g.
    `eqx.filter_jit(sharded_train(trainer, mesh))(state, 10)`. With `seeds`, `state` is
    several seeds' states stacked (`azx.presets.Preset.build_seeds`), each device trains
    its rows of every seed (all at once under `vmap`, or with `vmap_seeds=False` one after
    another: see [`over_seeds`][azx.parallel.over_seeds]), and the history has a seeds
    axis.

    **Raises:** `ValueError` if the trainer's rows do not split evenly over the devices.
    """
    _check(trainer, mesh)
    local = trainer.with_axis_name(AXIS)

    def run(state, num_steps: int):
        if seeds:
            return over_seeds(local.train_and_record, vmap=vmap_seeds)(state, num_steps)
        return local.train_and_record(state, num_steps)

    def train(state, num_steps: int):
        specs = state_specs(state, seeds=seeds)
        # check_vma=False for the reason given in `sharded_step`; the metrics are sums
        # over the axis, the same on every device.
        mapped = jax.shard_map(
            lambda state: run(state, num_steps),
            mesh=mesh,
            in_specs=(specs,),
            out_specs=(specs, P()),
            check_vma=False,
        )
        return mapped(state)

    return train
