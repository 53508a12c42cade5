"""The explorer's web application (Starlette) and its server (uvicorn).

The application answers a fixed set of routes: the page, its three files shipped in
`azx/explore/static/` (looked up by name in a table, never by a path from the request),
and a JSON interface to the runs and games of an `Explorer`.
Every refused request is a JSON object `{"error": message}` with a 4xx status; nothing a
request sends stops the server.
"""

import functools
import json
import socket
from importlib import resources
from pathlib import Path
from typing import Any

from .._errors import one_line
from .._rundir import RunError
from ._session import ExploreError, Explorer, check_simulations, load_explored


INSTALL = 'azx explore needs its extra: pip install "azx[explore]"'

_STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# Nothing outside this server: scripts, styles and images come from the page's own origin
# (pgx's SVG boards are inserted inline, hence `img-src data:` and inline SVG styles).
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "object-src 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _starlette():
    try:
        import starlette.applications
        import starlette.concurrency
        import starlette.responses
        import starlette.routing
    except ImportError:
        raise ImportError(INSTALL) from None
    return starlette


def _static(name: str) -> bytes:
    return resources.files("azx.explore").joinpath("static", name).read_bytes()


def make_app(explorer: Explorer):
    """The Starlette application serving `explorer`'s runs and games.

    **Raises:** `ImportError` naming `pip install "azx[explore]"` without Starlette.
    """
    starlette = _starlette()
    Response = starlette.responses.Response
    JSONResponse = starlette.responses.JSONResponse
    Route = starlette.routing.Route

    def answer(endpoint):
        # Every refusal is one JSON message; the server carries on whatever happened.
        @functools.wraps(endpoint)
        async def wrapped(request):
            try:
                body = await _body(request) if request.method == "POST" else {}
                result = await _in_thread(endpoint, request, body)
            except ExploreError as error:
                return JSONResponse({"error": error.message}, error.status, _SECURITY_HEADERS)
            except RunError as error:
                return JSONResponse({"error": str(error)}, 410, _SECURITY_HEADERS)
            except Exception as error:  # a bug: say what, and keep serving
                message = f"internal error: {type(error).__name__}: {one_line(error)}"
                return JSONResponse({"error": message}, 500, _SECURITY_HEADERS)
            return JSONResponse(result, headers=_SECURITY_HEADERS)

        return wrapped

    async def _in_thread(endpoint, request, body):
        # Searches take seconds: off the event loop, one at a time (the games change).
        def locked():
            with explorer.lock:
                return endpoint(request, body)

        return await starlette.concurrency.run_in_threadpool(locked)

    def page(request):
        del request
        return Response(_static("index.html"), media_type="text/html; charset=utf-8",
                        headers=_SECURITY_HEADERS)  # fmt: skip

    def static(request):
        name = request.path_params["name"]
        if name not in _STATIC:
            return JSONResponse({"error": f"no file {name!r}"}, 404, _SECURITY_HEADERS)
        return Response(_static(name), media_type=_STATIC[name], headers=_SECURITY_HEADERS)

    def runs(request, body):
        del request, body
        replays = [
            {
                "name": replay["name"],
                "run": replay["run_index"],
                "opponent": replay["opponent"],
                "result": replay["result"],
                "moves": len(replay["actions"]),
            }
            for replay in explorer.replays
        ]
        return {"runs": [explored.describe() for explored in explorer.runs], "replays": replays}

    def open_replay(request, body):
        del request
        name = explorer.open_replay(body.get("replay"))
        return {"id": name} | explorer.games[name].view()

    def curves(request, body):
        del body
        text = request.path_params["run"]
        if not text.isdigit():
            raise ExploreError(404, f"no run {text!r}: runs are numbered from 0")
        return explorer.curves(int(text))

    def new_game(request, body):
        del request
        name = explorer.new_game(
            body.get("run", 0),
            human_first=body.get("human_first", True),
            seed=body.get("seed", 0),
            simulations=body.get("simulations"),
        )
        return {"id": name} | explorer.games[name].view()

    def show_game(request, body):
        del body
        name = request.path_params["game"]
        return {"id": name} | explorer.game(name).view()

    def move(request, body):
        name = request.path_params["game"]
        if "action" not in body:
            raise ExploreError(400, 'a move is a JSON object like {"action": 4}')
        game = explorer.game(name)
        game.move(body["action"])
        return {"id": name} | game.view()

    def undo(request, body):
        del body
        name = request.path_params["game"]
        game = explorer.game(name)
        game.undo()
        return {"id": name} | game.view()

    def frame(request, body):
        del body
        game = explorer.game(request.path_params["game"])
        text = request.path_params["frame"]
        if not text.isdigit():
            raise ExploreError(404, f"no frame {text!r}: frames are numbered from 0")
        return game.frame(int(text))

    def analysis(request, body):
        del body
        game = explorer.game(request.path_params["game"])
        text = request.query_params.get("simulations")
        simulations = None
        if text is not None:
            if not text.isdigit():
                raise ExploreError(400, f"simulations must be a whole number, got {text!r}")
            simulations = check_simulations(int(text))
        return game.analyse(simulations)

    async def not_found(request, exc):
        del exc
        return JSONResponse({"error": f"no such page: {request.url.path}"}, 404, _SECURITY_HEADERS)

    async def not_allowed(request, exc):
        del exc
        return JSONResponse(
            {"error": f"{request.method} is not allowed on {request.url.path}"},
            405,
            _SECURITY_HEADERS,
        )

    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/runs", answer(runs)),
        Route("/api/runs/{run}/curves", answer(curves)),
        Route("/api/games", answer(new_game), methods=["POST"]),
        Route("/api/replays", answer(open_replay), methods=["POST"]),
        Route("/api/games/{game}", answer(show_game)),
        Route("/api/games/{game}/move", answer(move), methods=["POST"]),
        Route("/api/games/{game}/undo", answer(undo), methods=["POST"]),
        Route("/api/games/{game}/analysis", answer(analysis)),
        Route("/api/games/{game}/frames/{frame}", answer(frame)),
    ]
    return starlette.applications.Starlette(
        routes=routes, exception_handlers={404: not_found, 405: not_allowed}
    )


async def _body(request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ExploreError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ExploreError(400, f"the request body must be a JSON object, got {raw[:40]!r}")
    return body


def serve(
    directories: list[Path],
    *,
    replays: list[Path] = (),
    host: str = "127.0.0.1",
    port: int = 8000,
    echo=print,
):
    """Load the runs in `directories` (and the records of `azx eval --record` in the
    directories `replays`) and serve the explorer on `host:port` until interrupted;
    `echo` prints its address.

    **Raises:** `ImportError` naming `pip install "azx[explore]"` without Starlette or
    uvicorn; [`azx.run.RunError`][] for a directory that holds no run.
    """
    _starlette()
    try:
        import uvicorn
    except ImportError:
        raise ImportError(INSTALL) from None
    records = []
    for directory in replays:
        if not Path(directory).is_dir():
            raise RunError(f"`replays` {directory} is not a directory")
        records += sorted(Path(directory).glob("*.json"))
    app = make_app(Explorer(load_explored(directories), records))
    # Bound here, so that the address printed is the one served (port 0: a free one).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    shown = f"[{host}]" if ":" in host else host
    echo(f"azx explore: http://{shown}:{port}/ (Ctrl-C stops it)")
    server.run(sockets=[sock])
