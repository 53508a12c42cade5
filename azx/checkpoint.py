"""Checkpoints of a whole TrainState with orbax: atomic, checksummed, the last K kept,
exact resume, and a fall back past damaged ones."""

import gc
import json
import os
import shutil
import sys
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import parallel
from ._files import write_atomic
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
    # jax Arrays are restored into their own shardings (each process reads the slices
    # its devices hold), whatever the devices and processes that saved them.
    return {
        k: jax.ShapeDtypeStruct(
            np.shape(v), v.dtype, sharding=v.sharding if isinstance(v, jax.Array) else None
        )
        for k, v in flat.items()
    }


class DamagedCheckpointError(ValueError):
    """A checkpoint that cannot be read: a file of it is missing, truncated or altered
    since it was saved."""

    def __init__(self, directory: str, step: int, reason: str):
        super().__init__(f"checkpoint {step} in {directory} cannot be read: {reason}")
        self.directory = directory
        self.step = step
        self.reason = reason


class DamagedCheckpointWarning(UserWarning):
    """[`Checkpointer.restore`][azx.checkpoint.Checkpointer.restore] skipped a damaged
    checkpoint and restored an older one."""


_MANIFEST = "azx_files.json"  # each checkpoint's files: {relative path: [size, crc32]}
_TRASH = ".trash"  # old checkpoints are renamed here, then deleted
_SET_ASIDE = "unreadable"  # where `set_aside` moves damaged checkpoints


class Checkpointer:
    """Saves and restores whole training states (every array of a TrainState, the
    buffer, games, trees and key included) in `directory`, keeping the last `max_to_keep`
    and, if `keep_period` is set, every checkpoint whose number is a multiple of it.

    Each save is atomic: orbax writes into a temporary directory and renames it when
    complete, so a crash mid-save leaves the previous checkpoint intact and restorable.
    Old checkpoints leave the same way: renamed out of the listing in one step, then
    deleted, so a crash mid-deletion never leaves a half-deleted checkpoint listed.
    Each checkpoint lists its files with their sizes and CRC-32s (`azx_files.json`), and
    reading one checks them first: a damaged checkpoint (a file missing, truncated or
    altered) is reported as such
    ([`DamagedCheckpointError`][azx.checkpoint.DamagedCheckpointError]), never restored
    as different numbers. Nothing is written until the first `save`.
    """

    def __init__(
        self, directory: str | os.PathLike, *, max_to_keep: int = 3, keep_period: int | None = None
    ):
        check_positive_int("max_to_keep", max_to_keep)
        if keep_period is not None:
            check_positive_int("keep_period", keep_period)
        self.directory = os.path.abspath(os.fspath(directory))
        ocp = _orbax()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=max_to_keep,
                keep_period=keep_period,
                enable_async_checkpointing=False,
                create=False,
                todelete_subdir=_TRASH,
            ),
            item_names=("state", "meta"),
        )

    def save(self, state, *, step: int, meta: dict[str, Any] | None = None) -> None:
        """Save `state` as checkpoint number `step` (e.g. the training iteration), with a
        JSON-serialisable `meta` dict (e.g. the run's configuration) beside it."""
        flat = _flatten(state)
        meta = dict(meta or {})
        meta["_layout"] = {k: [list(np.shape(v)), str(v.dtype)] for k, v in flat.items()}
        ocp = _orbax()
        os.makedirs(self.directory, exist_ok=True)
        self._manager.save(
            int(step),
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(flat),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )
        self._manager.wait_until_finished()
        # With several processes, each writes the slices its devices hold and process 0
        # completes the checkpoint: it lists the files once every process has written its
        # own, and every process returns once the list is written.
        parallel.sync(f"azx: checkpoint {int(step)} in {self.directory} written")
        if jax.process_index() == 0:
            _write_manifest(Path(self.directory) / str(int(step)))
            # The checkpoints beyond `max_to_keep` were renamed into the trash: empty it
            # (and whatever a crash left there before).
            shutil.rmtree(Path(self.directory) / _TRASH, ignore_errors=True)
        parallel.sync(f"azx: checkpoint {int(step)} in {self.directory} listed")

    def latest_step(self) -> int | None:
        """Number of the newest checkpoint, or `None` if there is none."""
        self._manager.reload()
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """Numbers of the checkpoints, oldest first (damaged ones included: only
        restoring reads them)."""
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def meta(self, step: int | None = None) -> dict[str, Any]:
        """The `meta` dict saved with checkpoint `step` (default: the newest).

        **Raises:** [`DamagedCheckpointError`][azx.checkpoint.DamagedCheckpointError] if
        it cannot be read."""
        step = self._resolve(step)
        problem = _check_manifest(Path(self.directory) / str(step))
        if problem:
            raise DamagedCheckpointError(self.directory, step, problem)
        ocp = _orbax()
        args = ocp.args.Composite(meta=ocp.args.JsonRestore())
        meta = self._read(step, lambda: dict(self._manager.restore(step, args=args)["meta"]))
        if not isinstance(meta.get("_layout"), dict):
            raise DamagedCheckpointError(self.directory, step, "its meta has no array layout")
        return meta

    def restore(self, like, *, step: int | None = None):
        """Restore checkpoint `step` into the structure of `like` (e.g.
        `trainer.init(net, key=key)` for the same configuration).

        Without `step`, the newest checkpoint that reads back intact: each newer damaged
        one is skipped with a [`DamagedCheckpointWarning`][azx.checkpoint.DamagedCheckpointWarning]
        (nothing is deleted).

        **Raises:** `FileNotFoundError` if there is no checkpoint (or no checkpoint
        `step`); [`DamagedCheckpointError`][azx.checkpoint.DamagedCheckpointError] if
        checkpoint `step` (without `step`: every checkpoint) is damaged; `ValueError`
        naming the differing arrays if it was saved from a different configuration.
        """
        if step is not None:
            return self._restore(like, self._resolve(step))
        steps = self.all_steps()
        if not steps:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        damaged: list[DamagedCheckpointError] = []
        for candidate in reversed(steps):
            try:
                state = self._restore(like, candidate)
            except DamagedCheckpointError as error:
                damaged.append(error)
                continue
            for error in damaged:
                warnings.warn(
                    f"{error}; restored checkpoint {candidate} instead",
                    DamagedCheckpointWarning,
                    stacklevel=2,
                )
            return state
        newest, *older = damaged
        reasons = "; ".join(f"{error.step}: {error.reason}" for error in older)
        raise DamagedCheckpointError(
            self.directory,
            newest.step,
            newest.reason + (f"; nor can any older one ({reasons})" if older else ""),
        )

    def set_aside(self, step: int) -> Path:
        """Move checkpoint `step` (a damaged one, say) out of the listing, into
        `unreadable/` beside the checkpoints, where it stays for inspection. With several
        processes, every process calls it (process 0 moves it).
        **Returns:** its new path."""
        source = Path(self.directory) / str(self._resolve(step))
        target = Path(self.directory) / _SET_ASIDE / source.name
        suffix = 0
        while target.exists():
            suffix += 1
            target = target.with_name(f"{source.name}-{suffix}")
        parallel.sync(f"azx: setting checkpoint {step} in {self.directory} aside")
        if jax.process_index() == 0:
            target.parent.mkdir(exist_ok=True)
            source.rename(target)
        parallel.sync(f"azx: checkpoint {step} in {self.directory} set aside")
        self._manager.reload()
        return target

    def _restore(self, like, step: int):
        saved = self.meta(step)
        flat_like = _flatten(like)
        expected = {k: [list(np.shape(v)), str(v.dtype)] for k, v in flat_like.items()}
        if saved["_layout"] != expected:
            raise ValueError(_mismatch(self.directory, step, saved["_layout"], expected))
        ocp = _orbax()
        args = ocp.args.Composite(state=ocp.args.StandardRestore(_abstract(flat_like)))
        flat = self._read(step, lambda: self._manager.restore(step, args=args)["state"])
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

    def _read(self, step: int, read: Callable[[], Any]) -> Any:
        """`read()`, with any failure reported as a `DamagedCheckpointError`."""
        # A failed read leaves orbax coroutines that were never awaited, which Python
        # reports with a traceback each when they are collected: collect them here,
        # quietly, and report the failure once.
        hook = sys.unraisablehook
        sys.unraisablehook = lambda unraisable: None
        try:
            try:
                return read()
            except Exception as error:
                reason = _reason(error)
            gc.collect()
        finally:
            sys.unraisablehook = hook
        raise DamagedCheckpointError(self.directory, step, reason)

    def close(self) -> None:
        self._manager.close()


def _files(step_dir: Path) -> dict[str, list[int]]:
    files = {}
    for path in sorted(step_dir.rglob("*")):
        if path.is_file() and path.name != _MANIFEST:
            data = path.read_bytes()
            files[path.relative_to(step_dir).as_posix()] = [len(data), zlib.crc32(data)]
    return files


def _write_manifest(step_dir: Path) -> None:
    # orbax compresses chunks without a checksum: a flipped bit in a file can restore as
    # a different number. The CRC-32 of every file, written once the checkpoint is
    # complete (atomically: a crash leaves no manifest, and the checkpoint unverified),
    # lets a restore tell.
    write_atomic(step_dir / _MANIFEST, json.dumps(_files(step_dir)))


def _check_manifest(step_dir: Path) -> str | None:
    """What is wrong with the files of a checkpoint, or None (also for a checkpoint that
    has no manifest: one written before azx kept them, or cut short by a crash)."""
    path = step_dir / _MANIFEST
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
    except (ValueError, OSError) as error:
        return f"its file list {_MANIFEST} cannot be read ({error})"
    entries = saved.items() if isinstance(saved, dict) else [(None, None)]
    if not all(isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
               for _, v in entries):  # fmt: skip
        return f"its file list {_MANIFEST} is malformed"
    for name, (size, crc) in entries:
        file = step_dir / name
        if not file.is_file():
            return f"file {name} is missing"
        data = file.read_bytes()
        if len(data) != size:
            return f"file {name} has {len(data)} bytes, {size} when saved"
        if zlib.crc32(data) != crc:
            return f"file {name} has changed since it was saved (CRC-32 differs)"
    return None


def _reason(error: BaseException) -> str:
    """What went wrong reading a checkpoint, in one short line."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, FileNotFoundError | KeyError):
        text = f"missing: {text.strip(chr(39))}"
    elif isinstance(error, ValueError) and type(error).__name__ == "JSONDecodeError":
        text = f"a metadata file is not valid JSON ({text})"
    text = text.split(" See full TensorStore details")[0]
    return text if len(text) <= 200 else text[:199] + "…"


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


__all__ = ["Checkpointer", "DamagedCheckpointError", "DamagedCheckpointWarning"]
