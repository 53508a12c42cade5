"""Environments: one interface, with a pgx adapter for every pgx game."""

from ._abstract import AbstractEnv as AbstractEnv
from ._pgx import PgxEnv as PgxEnv, available as available, make as make
from ._symmetry import Symmetry as Symmetry
from ._wrappers import ScaleRewards as ScaleRewards
