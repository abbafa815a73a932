"""``loopbench families``: every scenario family with its parameters and defaults."""
from __future__ import annotations

import click

from sim.cli.app import LoopbenchError, main


def _fmt(value) -> str:
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"{value[0]}-{value[1]}"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


@main.command("families")
@click.argument("names", nargs=-1)
def families_cmd(names: tuple[str, ...]) -> None:
    """Describe scenario families: kind, what they simulate, parameters and defaults.

    Set a parameter in a suite file under [family_params.NAME], e.g. cycle = [6, 8].
    """
    from scenarios.base import healthy_families, loop_families, param_doc, registered

    FAMILIES = registered()
    order = loop_families() + healthy_families()
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise LoopbenchError(f"unknown scenario families: {', '.join(unknown)} (known: {', '.join(order)})")
    for name in names or order:
        info = FAMILIES[name]
        click.echo(f"{name} ({'loop' if info.looping else 'healthy'}): {info.doc}")
        for key, value in info.defaults.items():
            click.echo(f"  {key:13s} {_fmt(value):22s} {param_doc(name, key)}")
