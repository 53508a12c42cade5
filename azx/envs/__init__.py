"""Environments: one interface, with adapters for pgx, gymnax, xminigrid and brax."""

from ._abstract import (
    AbstractEnv as AbstractEnv,
    BoxActions as BoxActions,
    DiscreteActions as DiscreteActions,
)
from ._brax import BraxEnv as BraxEnv, BraxState as BraxState
from ._chance import (
    AbstractChanceEnv as AbstractChanceEnv,
    require_chance as require_chance,
    validate_outcome as validate_outcome,
)
from ._check import check_env as check_env
from ._dice import DiceRace as DiceRace, dice_race_q as dice_race_q
from ._gymnax import GymnaxEnv as GymnaxEnv
from ._memory import CueMemory as CueMemory
from ._pgx import PgxEnv as PgxEnv
from ._pgx_chance import (
    Pgx2048 as Pgx2048,
    PgxBackgammon as PgxBackgammon,
    unary_backgammon as unary_backgammon,
)
from ._registry import available as available, make as make, register as register
from ._symmetry import Symmetry as Symmetry
from ._wrappers import (
    AbstractEnvWrapper as AbstractEnvWrapper,
    AbstractObserveLegalMoves as AbstractObserveLegalMoves,
    AbstractScaleRewards as AbstractScaleRewards,
    ObserveLegalMoves as ObserveLegalMoves,
    ScaleRewards as ScaleRewards,
    unwrap as unwrap,
)
from ._xminigrid import XMinigridEnv as XMinigridEnv, xland_ruleset as xland_ruleset
