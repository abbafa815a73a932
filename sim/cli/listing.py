"""`loopbench list`: every registered detector, scenario family and suite."""
from __future__ import annotations


import click

from sim.cli.app import main


@main.command("list")
def list_cmd() -> None:
    """Name every registered detector, scenario family and suite."""
    from scenarios.base import registered
    from scenarios.suites import suite_names

    from detectors.registry import available, detector_class

    click.echo("Detectors:")
    for name in available():
        try:
            cls = detector_class(name)
            doc = (cls.__doc__ or "").strip().splitlines()[0]
        except Exception as exc:  # noqa: BLE001 — a broken plug-in must not hide the others
            doc = f"(cannot load: {exc})"
        click.echo(f"  {name:16s} {doc}")
    click.echo("Scenario families:")
    for looping in (True, False):
        for name in sorted(registered()):
            info = registered()[name]
            if info.looping == looping:
                click.echo(f"  {name:16s} {'loop   ' if looping else 'healthy'}  {info.doc}")
    click.echo("Suites: " + ", ".join(suite_names()))
