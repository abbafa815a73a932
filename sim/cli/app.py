"""The ``loopbench`` command line.

Exit codes: 0 success; 1 a regression (``check``); 2 a usage or input error (bad option,
unreadable or empty file, unknown detector, a detector that cannot be imported or built,
a run folder that cannot be resumed); 3 the command finished but skipped malformed input
records (each was reported on stderr with its file and line); 130 / 143 interrupted by
SIGINT / SIGTERM (``run`` keeps its finished tasks: resume with ``--resume``).
"""
from __future__ import annotations


import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import click

EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class LoopbenchError(click.ClickException):
    """A one-line error and exit code 2; never a traceback."""

    exit_code = EXIT_USAGE

    def show(self, file=None) -> None:
        click.echo(f"loopbench: error: {self.format_message()}", err=True)


def parse_value(text: str) -> Any:
    """A ``--param`` value: TOML (``2``, ``true``, ``["a", "b"]``), else JSON (lists and objects:
    ``[{"tool": "poll", "args": {}}]``), else the text itself. A value that opens a list or a table
    but is neither is refused, pointing to ``--config`` (a TOML file takes any structure)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        pass
    if text.lstrip()[:1] in ("[", "{"):
        raise LoopbenchError(f"--param value {text!r} is neither TOML nor JSON; quote it for the shell "
                             "(--param 'D.P=[\"a\", \"b\"]') or put the structure in a --config TOML file")
    return text


def split_list(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def load_config(path: str | None) -> dict[str, Any]:
    """A TOML configuration: ``[run]`` options, ``[detectors.NAME]`` parameters (with
    ``tool_overrides`` tables), and ``[tools.NAME]`` entries of the tool registry."""
    if not path:
        return {}
    p = Path(path)
    if not p.is_file():
        raise LoopbenchError(f"{path}: no such configuration file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LoopbenchError(f"{path}: {exc}") from None


def load_detector_class(spec: str, label: str | None = None) -> type:
    """The class of a registered name or ``module:Class`` spec, or a one-line error."""
    from detectors.registry import DetectorNotFound, detector_class

    try:
        return detector_class(spec)
    except DetectorNotFound as exc:
        raise LoopbenchError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 — a plug-in whose import fails in any way
        raise LoopbenchError(f"detector {label or spec!r}: cannot load {spec!r}: {first_line(exc)}") from None


def detector_specs(names: list[str], config: dict[str, Any], params: tuple[str, ...]):
    """Resolve ``--detectors`` entries (``name``, ``module:Class`` or ``label=spec``) with parameters."""
    from sim.config.spec import DetectorSpec

    per: dict[str, dict[str, Any]] = {k: dict(v) for k, v in config.get("detectors", {}).items()}
    given = {k: f"[detectors.{k}] of the configuration" for k in per}  # where each detector's parameters came from
    for item in params:
        key, eq, value = item.partition("=")
        det, dot, pname = key.partition(".")
        if ":" in key:  # a module:Class spec, whose module may be dotted: the parameter follows the class
            module, _, rest = key.partition(":")
            cls, dot, pname = rest.partition(".")
            det = f"{module}:{cls}"
        if not eq or not dot or not pname:
            raise LoopbenchError(f"--param {item!r}: expected DETECTOR.PARAM=VALUE")
        target = per.setdefault(det, {})
        given.setdefault(det, f"--param {item}")
        parts = pname.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = parse_value(value)
    selected = {part for entry in names for part in (entry.partition("=")[0], entry.partition("=")[2] or entry)}
    for det, where in given.items():
        if det not in selected:
            raise LoopbenchError(f"{where}: detector {det!r} is not selected (selected: "
                                 f"{', '.join(e.partition('=')[0] for e in names)}); add it to --detectors or drop it")
    tools = config.get("tools", {})
    specs = []
    for entry in names:
        label, eq, spec = entry.partition("=")
        if not eq:
            spec = label
        cls = load_detector_class(spec, label)
        p = dict(per.get(label, per.get(spec, {})))
        accepted = cls.param_names() if hasattr(cls, "param_names") else []
        if tools and "tool_overrides" in accepted:
            # The harness's tool registry: a tool's own max_repeats applies unless overridden.
            merged = {t: dict(v) for t, v in (p.get("tool_overrides") or {}).items()}
            for tool, tcfg in tools.items():
                for k, v in tcfg.items():
                    merged.setdefault(tool, {}).setdefault(k, v)
            p["tool_overrides"] = merged
        unknown = set(p) - set(accepted) if accepted else set()
        if unknown:
            raise LoopbenchError(f"detector {label!r} has no parameter(s) {', '.join(sorted(unknown))} "
                                 f"(it takes: {', '.join(accepted) or 'none'})")
        specs.append(DetectorSpec(label, spec, p))
        try:
            specs[-1].build()
        except Exception as exc:  # noqa: BLE001 — a constructor may reject a value
            hint = ""
            if params and any(isinstance(v, str) for v in p.values()) and "(expected a" in str(exc):
                hint = " (--param takes lists and tables as JSON or TOML, e.g. 'D.P=[\"a\"]', or use --config)"
            raise LoopbenchError(f"detector {label!r}: {first_line(exc)}{hint}") from None
    return specs


def named_suite(name: str, option: str = ""):
    """The suite ``name`` (a name or a .toml path), or a one-line error (``option`` before it)."""
    from scenarios.suites import SuiteError, load_suite

    try:
        return load_suite(name)
    except SuiteError as exc:
        raise LoopbenchError(f"{option}{exc}") from None


def with_suite_params(config: dict[str, Any], suite: Any, names: list[str]) -> dict[str, Any]:
    """``config`` with the suite's ``[detector_params.NAME]`` under it, for the selected detectors
    only (a suite's defaults for a detector the user left out are no mistake of the user's)."""
    labels = {e.partition("=")[0] for e in names}
    per = {k: dict(v) for k, v in (getattr(suite, "detector_params", None) or {}).items() if k in labels}
    for k, v in (config.get("detectors") or {}).items():
        per[k] = {**per.get(k, {}), **v}
    return {**config, "detectors": per} if per else config


def first_line(exc: BaseException) -> str:
    from sim.play.openloop import describe

    text = describe(exc)
    # A DetectorNotFound or ValueError speaks for itself; anything else keeps its type.
    prefix = f"{type(exc).__name__}: "
    return text[len(prefix):] if isinstance(exc, (LookupError, ValueError)) and text.startswith(prefix) else text


def engine_options(f):
    """``--workers``, ``--engine`` and ``--ray-address``: where a command's detector tasks run."""
    f = click.option("--ray-address", default=None,
                     help="With --engine ray: 'local', ray://HEAD:10001 or HEAD:6379. "
                          "[default: $RAY_ADDRESS, else a new local Ray instance]")(f)
    f = click.option("--engine", type=click.Choice(["local", "ray"]), default="local",
                     help="Run detector tasks on this machine's process pool, or on Ray sharded by episode "
                          "(pip install 'loopbench[ray]'). [default: local]")(f)
    return click.option("--workers", type=click.IntRange(0), default=0,
                        help="Local processes: 0 = one per core, 1 = no pool. [default: 0]")(f)


def make_engine(engine: str, workers: int, ray_address: str | None):
    """The :class:`sim.execute.engines.Engine` the options name; Ray's absence is a one-line error, before any work."""
    from sim.execute.engines import Engine, EngineError

    if engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise LoopbenchError("--engine ray needs Ray: pip install 'loopbench[ray]'") from None
    elif ray_address:
        raise LoopbenchError("--ray-address needs --engine ray")
    eng = Engine(engine, workers=workers, address=ray_address)
    try:
        eng.check()  # an unreachable cluster is reported now, whatever the suite's size
    except EngineError as exc:
        raise LoopbenchError(str(exc)) from None
    return eng


def set_embed_cache(value: str | None) -> None:
    """Point the embedding detectors' disk cache (an env var, so pool workers inherit it)."""
    import os

    from detectors.embedding_model import CACHE_ENV

    if value is None:
        if os.environ.get(CACHE_ENV):
            return
        value = str(Path.home() / ".cache" / "loopbench" / "embeddings")
    if value.lower() in ("off", "none", ""):
        os.environ.pop(CACHE_ENV, None)
        return
    os.environ[CACHE_ENV] = value


def default_detectors() -> list[str]:
    from detectors.registry import available

    return available()


def report_problems(problems: list[str], limit: int = 50) -> None:
    for p in problems[:limit]:
        click.echo(f"loopbench: skipped: {p}", err=True)
    if len(problems) > limit:
        click.echo(f"loopbench: ... and {len(problems) - limit} more skipped records", err=True)


class OneLineGroup(click.Group):
    """A command group whose usage errors (a bad option value, a missing argument, an unknown
    command) are one ``loopbench: error:`` line and exit 2, like every other input error."""

    group_class = type  # sub-groups (``baseline``) behave the same

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise one_line_usage(exc) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise one_line_usage(exc) from None


def one_line_usage(exc: click.UsageError) -> click.ClickException:
    if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        return exc  # `loopbench` alone prints its help
    where = exc.ctx.command_path if exc.ctx is not None else "loopbench"
    return LoopbenchError(f"{exc.format_message()} (see `{where} --help`)")


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loopbench")
def main() -> None:
    """loopbench: benchmark tool-call loop detectors for LLM agents."""


def out_dir(out: str | None, stem: str) -> Path:
    if out:
        return Path(out)
    return Path("runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C but reported with its own exit code."""


class interruptible:
    """SIGTERM raises ``Terminated`` in the main thread while the block runs (Ctrl-C already
    raises ``KeyboardInterrupt``); the previous handler comes back afterwards."""

    def __enter__(self):
        import signal
        import threading

        self._prev = None
        if threading.current_thread() is threading.main_thread():
            self._prev = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Terminated()

    def __exit__(self, *exc):
        import signal

        if self._prev is not None:
            signal.signal(signal.SIGTERM, self._prev)


def check_timeout_value(value: Any) -> float | None:
    from sim.config.spec import DEFAULT_CHECK_TIMEOUT

    if value is None:
        return DEFAULT_CHECK_TIMEOUT
    return float(value) or None


def resume_command(out: Path) -> str:
    """The command line that finishes this run: the same options, with ``--resume --out``."""
    import shlex

    argv = sys.argv[1:]
    if not argv or argv[0] != "run":
        return f"loopbench run --resume --out {shlex.quote(str(out))} (with this run's other options)"
    args = [a for a in argv[1:] if a not in ("--resume", "--force")]
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return shlex.join(["loopbench", "run", *args, "--resume"])
