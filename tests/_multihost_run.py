"""Run in subprocesses: AlphaZero trained by two processes with two CPU devices each,
checkpointed and resumed by a fresh pair of processes, against one process with four.

    python _multihost_run.py train DIRECTORY PORT PROCESS_ID   # 2 steps, save (2 processes)
    python _multihost_run.py resume DIRECTORY PORT PROCESS_ID  # restore, 2 more steps
    python _multihost_run.py reference DIRECTORY               # 1 process, 4 devices

`resume` and `reference` write the final parameters to `DIRECTORY/<role>.npz`.
"""

import os
import sys


ROLE, DIRECTORY = sys.argv[1], sys.argv[2]
MULTIHOST = ROLE in ("train", "resume")
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={2 if MULTIHOST else 4}"

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec  # noqa: E402


if MULTIHOST:
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{sys.argv[3]}",
        num_processes=2,
        process_id=int(sys.argv[4]),
        initialization_timeout=60,
        heartbeat_timeout_seconds=30,
        shutdown_timeout_seconds=30,
    )

from _trainer_setup import tic_tac_toe  # noqa: E402

import azx  # noqa: E402


KEYS = jax.random.split(jax.random.key(11), 4)  # two steps before the checkpoint, two after


def train(step, state, keys):
    for key in keys:
        state = step(state, key)
    return state


def arrays(tree) -> list[np.ndarray]:
    """The leaves of a host-local tree as numpy arrays, typed PRNG keys as their data."""
    is_key = lambda x: jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)  # noqa: E731
    return [np.asarray(jax.random.key_data(x) if is_key(x) else x) for x in jax.tree.leaves(tree)]


def save_params(state, name: str) -> None:
    params = arrays(azx.parallel.gather(state).params)
    if jax.process_index() == 0:
        np.savez(os.path.join(DIRECTORY, name), *params)


def main():
    trainer, initial = tic_tac_toe(num_envs=8)
    mesh = azx.parallel.make_mesh()
    assert mesh.devices.size == 4, mesh
    state = azx.parallel.shard_state(initial, mesh)
    step = eqx.filter_jit(azx.parallel.sharded_step(trainer, mesh))
    checkpoints = azx.checkpoint.Checkpointer(os.path.join(DIRECTORY, "checkpoints"))
    if ROLE == "train":
        assert len(jax.local_devices()) == 2 and jax.process_count() == 2
        state = train(step, state, KEYS[:2])
        # The games now differ from row to row (at the start every row is the same empty
        # board): placing the whole state again must put every row back where it was.
        whole = azx.parallel.gather(state)
        state = azx.parallel.shard_state(whole, mesh)
        assert state.buffer.position.sharding.spec == PartitionSpec(azx.parallel.AXIS)
        for a, b in zip(arrays(whole), arrays(azx.parallel.gather(state)), strict=True):
            np.testing.assert_array_equal(a, b)
        checkpoints.save(state, step=2, meta={"processes": 2})
    elif ROLE == "resume":
        state = checkpoints.restore(state)
        assert state.buffer.position.sharding.spec == PartitionSpec(azx.parallel.AXIS)
        assert int(state.iteration) == 2, state.iteration
        save_params(train(step, state, KEYS[2:]), "resume.npz")
    else:
        # The same four steps without a checkpoint; the checkpoint of two processes restored
        # on one; and another seed, to show the comparison tells runs apart.
        save_params(train(step, state, KEYS), "reference.npz")
        restored = checkpoints.restore(state)
        save_params(train(step, restored, KEYS[2:]), "restored_on_one.npz")
        other_keys = jax.random.split(jax.random.key(12), 4)
        save_params(train(step, state, other_keys), "other_seed.npz")
    checkpoints.close()
    print(f"{ROLE} {jax.process_index()} OK", flush=True)


if __name__ == "__main__":
    main()
