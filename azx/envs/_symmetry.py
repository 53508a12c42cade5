"""Symmetries of board games, as permutations of observation elements and actions."""

from typing import NamedTuple

import numpy as np


class Symmetry(NamedTuple):
    """A transformation of the board that maps every position to one of equal value.

    Both fields are permutations, applied by indexing: the transformed observation is
    `observation.reshape(-1)[observation_index].reshape(observation.shape)`, and a
    per-action array `x` (legal mask, policy) becomes `x[action_index]`.
    """

    observation_index: np.ndarray
    action_index: np.ndarray


def _observation_index(source: np.ndarray, channels: int) -> np.ndarray:
    """Element permutation of a `[height, width, channels]` observation whose cell `i`
    comes from cell `source[i]` (cells row-major)."""
    return (source[:, None] * channels + np.arange(channels)[None, :]).reshape(-1)


def _board_symmetries(cells: np.ndarray, channels: int, extra_actions: int) -> list[Symmetry]:
    """Symmetries from index grids: `cells` is `[k, height, width]`, each entry the source
    cell (row-major) of that transformed cell. Observations are `[height, width, channels]`;
    actions are the cells in row-major order, then `extra_actions` (e.g. pass) unchanged."""
    out = []
    for grid in cells:
        source = grid.reshape(-1)
        extra = np.arange(source.size, source.size + extra_actions)
        out.append(Symmetry(_observation_index(source, channels), np.concatenate([source, extra])))
    return out


def dihedral(size: int, channels: int, extra_actions: int = 0) -> tuple[Symmetry, ...]:
    """The 8 rotations and reflections of a square board (identity first)."""
    grid = np.arange(size * size).reshape(size, size)
    grids = []
    for flip in (False, True):
        g = grid.T if flip else grid
        for turns in range(4):
            grids.append(np.rot90(g, turns))
    return tuple(_board_symmetries(np.stack(grids), channels, extra_actions))


def mirror(height: int, width: int, channels: int) -> tuple[Symmetry, ...]:
    """Identity and the left-right mirror of a board whose actions are its columns
    (connect four)."""
    grid = np.arange(height * width).reshape(height, width)
    return tuple(
        Symmetry(_observation_index(g.reshape(-1), channels), g[0] % width)
        for g in (grid, grid[:, ::-1])
    )
