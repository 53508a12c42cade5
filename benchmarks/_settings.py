"""`FIELD=VALUE` changes to a preset, for the paired runs of the benchmarks."""

import json

import azx


def add_set_option(parser) -> None:
    """The `--set FIELD=VALUE` option (repeatable) that `preset_with` reads."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a change to the preset: a config field, env, iterations, search, network, "
        "search_options, network_options, or search.X / network.X an option; may repeat",
    )


def preset_with(name: str, settings: list[str]) -> azx.presets.Preset:
    """The preset `name` with `KEY=VALUE` changes, as `azx train --set` makes them
    ([`azx.presets.Preset.changed`][]): a field of its config (`random_opening_moves=2`),
    `network.X` / `search.X` an option of its network or search
    (`search.visit_count_target=true`), or a field of the preset (`iterations=200`);
    `env=NAME` another environment of the same kind."""
    preset = azx.presets.get(name)
    env = [s.partition("=")[2] for s in settings if s.startswith("env=")]
    rest = [s for s in settings if not s.startswith("env=")]
    try:
        env = json.loads(env[-1]) if env else None  # `env="NAME"`, as JSON
    except json.JSONDecodeError:
        env = env[-1]  # `env=NAME`
    try:
        return preset.changed(env=env, settings=rest)
    except ValueError as error:
        raise SystemExit(f"--set: {error}") from None
