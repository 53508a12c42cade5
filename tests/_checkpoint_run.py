"""Run in a subprocess: train / save / restore for the resume and crash tests."""

import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

from _trainer_setup import tic_tac_toe  # noqa: E402

import azx  # noqa: E402


def train(directory, start, stop):
    """Train from checkpoint `start` (0: from scratch) to iteration `stop`; save it."""
    trainer, state = tic_tac_toe(reuse_tree=True, search="puct")
    checkpoints = azx.checkpoint.Checkpointer(directory)
    if start:
        state = checkpoints.restore(state, step=start)
        assert int(state.iteration) == start
    state = eqx.filter_jit(lambda s: trainer.train(s, stop - start))(state)
    checkpoints.save(state, step=stop)


def large_state(step: int):
    """A training state plus a large array, both marked with `step`: large enough that a
    save takes long enough to be killed in the middle."""
    _, state = tic_tac_toe()
    state = eqx.tree_at(lambda s: s.iteration, state, jnp.int32(step))
    return state, jnp.full(4_000_000, float(step), jnp.float32)


def save_forever(directory):
    """Save ever-changing large states until killed; announce each save on stdout."""
    checkpoints = azx.checkpoint.Checkpointer(directory, max_to_keep=2)
    for step in range(1, 10_000):
        payload = large_state(step)
        print(f"saving {step}", flush=True)
        checkpoints.save(payload, step=step)
        print(f"saved {step}", flush=True)
        time.sleep(0.01)


def save_and_stall_deleting(directory):
    """Save checkpoints 1 and 2 keeping one, and stall half-way through deleting the old
    one (announced on stdout) until killed."""
    import azx.checkpoint

    def stalling_rmtree(path, ignore_errors=False):
        files = sorted(p for p in path.rglob("*") if p.is_file())
        for file in files[: len(files) // 2]:
            file.unlink()
        print("deleting", flush=True)
        time.sleep(600)

    checkpoints = azx.checkpoint.Checkpointer(directory, max_to_keep=1)
    checkpoints.save(large_state(1), step=1)
    azx.checkpoint.shutil.rmtree = stalling_rmtree
    checkpoints.save(large_state(2), step=2)


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "stall-deleting":
        save_and_stall_deleting(sys.argv[2])
    else:
        save_forever(sys.argv[2])
