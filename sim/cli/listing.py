"""`loopbench list`: every registered detector, scenario family and suite; one detector's parameters."""
from __future__ import annotations

import inspect
import json
import textwrap
from typing import Any

import click

from sim.cli.app import load_detector_class, main


@main.command("list")
@click.argument("detector", required=False)
def list_cmd(detector: str | None) -> None:
    """Name every registered detector, scenario family and suite.

    With DETECTOR (a registered name or module:Class): what it does, and every parameter with
    its default and the values it takes (what --param and a --config file may set).
    """
    if detector:
        describe_detector(detector)
        return
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


def _shown(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "(required)"
    try:
        return json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)
    except TypeError:
        return repr(value)


def describe_detector(spec: str) -> None:
    """One detector: its class, its docstring, and a row per parameter (default, allowed values)."""
    from detectors.params import param_rules

    cls = load_detector_class(spec)
    click.echo(f"{spec}: {cls.__module__}:{cls.__qualname__}")
    doc = inspect.cleandoc(cls.__doc__ or "")
    if doc:
        click.echo("")
        click.echo(textwrap.indent(doc, "  "))
    rules = param_rules(cls)
    try:
        params = [p for p in inspect.signature(cls.__init__).parameters.values()
                  if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    click.echo("")
    if not params:
        click.echo("Parameters: none")
        return
    click.echo("Parameters (--param NAME.PARAM=VALUE, or [detectors.NAME] in a --config file):")
    width = max(len(p.name) for p in params)
    for p in params:
        rule = rules.get(p.name)
        allowed = rule.describe() if rule is not None else "any value"
        click.echo(f"  {p.name:{width}s}  default {_shown(p.default)}; {allowed}")
        values = getattr(cls, "value_docs", {}).get(p.name, {})
        for value, what in values.items():
            click.echo(f"  {'':{width}s}    {value}: {what}")
