"""`azx explore`: a local web page to play a trained agent and see why it plays what it
plays (the network's prior and value, the search's visits and Q per move).

The page needs the `explore` extra (`pip install "azx[explore]"`: Starlette and
uvicorn); the analysis itself (`analyse`) needs nothing beyond azx.
"""

from ._episode import RecordedEpisode as RecordedEpisode, record_episode as record_episode
from ._explain import explain_move as explain_move, explanation as explanation
from ._record import record_games as record_games
from ._server import make_app as make_app, serve as serve
from ._session import (
    MAX_SIMULATIONS as MAX_SIMULATIONS,
    Episode as Episode,
    ExploredRun as ExploredRun,
    ExploreError as ExploreError,
    Explorer as Explorer,
    Game as Game,
    Moves as Moves,
    analyse as analyse,
    load_explored as load_explored,
)
