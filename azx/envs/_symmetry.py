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


def _symmetry(grid: np.ndarray, channels: int, action_index: np.ndarray) -> Symmetry:
    """The symmetry of a `[height, width, channels]` observation whose transformed cell
    `(r, c)` comes from cell `grid[r, c]` (cells numbered row-major)."""
    source = grid.reshape(-1)
    observation_index = (source[:, None] * channels + np.arange(channels)[None, :]).reshape(-1)
    return Symmetry(observation_index, action_index)


def dihedral(size: int, channels: int, extra_actions: int = 0) -> tuple[Symmetry, ...]:
    """The 8 rotations and reflections of a square board (identity first). Actions are
    the cells in row-major order, then `extra_actions` (e.g. pass) that map to themselves."""
    grid = np.arange(size * size).reshape(size, size)
    extra = np.arange(size * size, size * size + extra_actions)
    grids = [np.rot90(g, turns) for g in (grid, grid.T) for turns in range(4)]
    return tuple(_symmetry(g, channels, np.concatenate([g.reshape(-1), extra])) for g in grids)


def mirror(height: int, width: int, channels: int) -> tuple[Symmetry, ...]:
    """Identity and the left-right mirror of a board whose actions are its columns
    (connect four)."""
    grid = np.arange(height * width).reshape(height, width)
    return tuple(_symmetry(g, channels, g[0] % width) for g in (grid, grid[:, ::-1]))
