"""`FIELD=VALUE` changes to a preset, for the paired runs of the benchmarks."""

import dataclasses
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
    """The preset `name` with `FIELD=VALUE` changes (values read as JSON): a field of its
    `Config` (`random_opening_moves=2`), `network.X` / `search.X` an option of its network
    or search (`search.visit_count_target=true`), or one of the preset's own fields
    `env`, `iterations`, `search`, `network`, `search_options`, `network_options`."""
    preset = azx.presets.get(name)
    for setting in settings:
        field, equals, text = setting.partition("=")
        if not equals:
            raise SystemExit(f"--set takes FIELD=VALUE, got {setting!r}")
        value = json.loads(text)
        if field in ("env", "iterations", "search", "network", "search_options", "network_options"):
            preset = preset.replace(**{field: value})
        elif field.startswith(("network.", "search.")):
            options_field = field.partition(".")[0] + "_options"
            owner = preset if options_field == "network_options" else preset.recipe
            options = getattr(owner, options_field) | {field.partition(".")[2]: value}
            preset = preset.replace(**{options_field: options})
        else:
            config = dataclasses.replace(preset.config, **{field: value})
            preset = dataclasses.replace(preset, config=config)
    return preset
