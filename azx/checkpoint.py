"""Checkpoints of a whole TrainState with orbax: atomic, the last K kept, exact resume."""

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_positive_int


def _orbax():
    # Imported on first use: orbax takes about a second to import, and `import azx`
    # should not pay for it.
    import orbax.checkpoint

    return orbax.checkpoint


def _flatten(tree) -> dict[str, Any]:
    # A flat {path: array} dict: readable on disk and in error messages, and independent of
    # how Equinox registers its Modules. Typed PRNG keys are stored as their raw data.
    flat = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        flat[jax.tree_util.keystr(path)] = leaf
    return flat


def _unflatten(like, flat: dict[str, Any]):
    paths_and_leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    leaves = []
    for path, leaf in paths_and_leaves:
        value = flat[jax.tree_util.keystr(path)]
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(leaf))
        leaves.append(value)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _abstract(flat: dict[str, Any]) -> dict[str, Any]:
    return {k: jax.ShapeDtypeStruct(np.shape(v), v.dtype) for k, v in flat.items()}


class Checkpointer:
    """Saves and restores whole training states (every array of a TrainState, the
    buffer, games, trees and key included) in `directory`, keeping the last `max_to_keep`.

    Each save is atomic: orbax writes into a temporary directory and renames it when
    complete, so a crash mid-save leaves the previous checkpoint intact and restorable.
    """

    def __init__(self, directory: str | os.PathLike, *, max_to_keep: int = 3):
        check_positive_int("max_to_keep", max_to_keep)
        self.directory = os.path.abspath(os.fspath(directory))
        ocp = _orbax()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=max_to_keep,
                enable_async_checkpointing=False,
                create=True,
            ),
            item_names=("state", "meta"),
        )

    def save(self, state, *, step: int, meta: dict[str, Any] | None = None) -> None:
        """Save `state` as checkpoint number `step` (e.g. the training iteration), with a
        JSON-serialisable `meta` dict (e.g. the run's configuration) beside it."""
        meta = dict(meta or {})
        meta["_layout"] = {k: [list(np.shape(v)), str(v.dtype)] for k, v in _flatten(state).items()}
        ocp = _orbax()
        self._manager.save(
            int(step),
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(_flatten(state)),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )
        self._manager.wait_until_finished()

    def latest_step(self) -> int | None:
        """Number of the newest complete checkpoint, or `None` if there is none."""
        self._manager.reload()
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def meta(self, step: int | None = None) -> dict[str, Any]:
        """The `meta` dict saved with checkpoint `step` (default: the newest)."""
        step = self._resolve(step)
        ocp = _orbax()
        restored = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(restored["meta"])

    def restore(self, like, *, step: int | None = None):
        """Restore checkpoint `step` (default: the newest) into the structure of `like`
        (e.g. `trainer.init(net, key=key)` for the same configuration).

        **Raises:** `FileNotFoundError` if there is no checkpoint; `ValueError` naming the
        differing arrays if the checkpoint was saved from a different configuration.
        """
        step = self._resolve(step)
        saved = self.meta(step)["_layout"]
        expected = {k: [list(np.shape(v)), str(v.dtype)] for k, v in _flatten(like).items()}
        if saved != expected:
            raise ValueError(_mismatch(self.directory, step, saved, expected))
        ocp = _orbax()
        flat = self._manager.restore(
            step,
            args=ocp.args.Composite(state=ocp.args.StandardRestore(_abstract(_flatten(like)))),
        )["state"]
        return _unflatten(like, flat)

    def _resolve(self, step: int | None) -> int:
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"no checkpoint in {self.directory}")
        elif step not in self.all_steps():
            raise FileNotFoundError(
                f"no checkpoint {step} in {self.directory}; have {self.all_steps()}"
            )
        return step

    def close(self) -> None:
        self._manager.close()


def _describe(layout) -> str:
    shape, dtype = layout
    return f"{dtype}{list(shape)}"


def _mismatch(directory, step, saved, expected) -> str:
    lines = []
    for key in sorted(set(saved) | set(expected)):
        if key not in expected:
            lines.append(f"  {key}: in the checkpoint, not in this configuration")
        elif key not in saved:
            lines.append(f"  {key}: in this configuration, not in the checkpoint")
        elif saved[key] != expected[key]:
            lines.append(
                f"  {key}: checkpoint {_describe(saved[key])}, "
                f"this configuration {_describe(expected[key])}"
            )
    shown = "\n".join(lines[:8]) + (f"\n  ... and {len(lines) - 8} more" if len(lines) > 8 else "")
    return (
        f"checkpoint {step} in {directory} was saved from a different configuration "
        f"({len(lines)} arrays differ):\n{shown}"
    )


__all__ = ["Checkpointer"]
