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


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _split(text: str | None) -> list[str]:
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


def detector_specs(names: list[str], config: dict[str, Any], params: tuple[str, ...]):
    """Resolve ``--detectors`` entries (``name``, ``module:Class`` or ``label=spec``) with parameters."""
    from detectors.registry import DetectorNotFound, detector_class

    from .runner import DetectorSpec

    per: dict[str, dict[str, Any]] = {k: dict(v) for k, v in config.get("detectors", {}).items()}
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
        parts = pname.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = _parse_value(value)
    tools = config.get("tools", {})
    specs = []
    for entry in names:
        label, eq, spec = entry.partition("=")
        if not eq:
            spec = label
        try:
            cls = detector_class(spec)
        except DetectorNotFound as exc:
            raise LoopbenchError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 — a plug-in whose import fails in any way
            raise LoopbenchError(f"detector {label!r}: cannot load {spec!r}: {_first_line(exc)}") from None
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
            raise LoopbenchError(f"detector {label!r}: {_first_line(exc)}") from None
    return specs


def _first_line(exc: BaseException) -> str:
    from .openloop import describe

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
    """The :class:`sim.engines.Engine` the options name; Ray's absence is a one-line error, before any work."""
    from .engines import Engine

    if engine == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise LoopbenchError("--engine ray needs Ray: pip install 'loopbench[ray]'") from None
    elif ray_address:
        raise LoopbenchError("--ray-address needs --engine ray")
    return Engine(engine, workers=workers, address=ray_address)


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


def _default_detectors() -> list[str]:
    from detectors.registry import available

    return available()


def _report_problems(problems: list[str], limit: int = 50) -> None:
    for p in problems[:limit]:
        click.echo(f"loopbench: skipped: {p}", err=True)
    if len(problems) > limit:
        click.echo(f"loopbench: ... and {len(problems) - limit} more skipped records", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loopbench")
def main() -> None:
    """loopbench: benchmark tool-call loop detectors for LLM agents."""


@main.command("list")
def list_cmd() -> None:
    """Name every registered detector, scenario family and suite."""
    from scenarios import families  # noqa: F401
    from scenarios.base import FAMILIES
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
        for name in sorted(FAMILIES):
            info = FAMILIES[name]
            if info.looping == looping:
                click.echo(f"  {name:16s} {'loop   ' if looping else 'healthy'}  {info.doc}")
    click.echo("Suites: " + ", ".join(suite_names()))


def _out_dir(out: str | None, stem: str) -> Path:
    if out:
        return Path(out)
    return Path("runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


@main.command("run")
@click.option("--suite", default=None, help="Suite name (quick, default, full) or a .toml path. [default: default]")
@click.option("--detectors", "detectors_opt", default=None, help="Comma-separated: name, module:Class or label=spec. [default: all registered]")
@click.option("--families", default=None, help="Comma-separated scenario families. [default: the suite's]")
@click.option("--seed", type=int, default=None, help="Suite seed. [default: the suite's]")
@click.option("--episodes", type=click.IntRange(1), default=None, help="Episodes per family. [default: the suite's]")
@click.option("--mode", type=click.Choice(["open", "closed", "both"]), default=None, help="Open loop, closed loop or both.")
@click.option("--out", default=None, help="Run folder. [default: runs/SUITE-TIMESTAMP]")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters, tool registry).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE, e.g. exact.max_repeats_per_signature=2 (repeatable).")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@engine_options
@click.option("--embed-cache", default=None, help="Directory for the embedding cache, or 'off'. [default: ~/.cache/loopbench/embeddings]")
@click.option("--check-timeout", type=click.FloatRange(0), default=None, help="Seconds a detector call may take before its episode fails; 0 = no limit. [default: 5]")
@click.option("--resume", is_flag=True, help="Finish an interrupted run in --out: same options, only the missing detector tasks run.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
def run_cmd(suite, detectors_opt, families, seed, episodes, mode, out, config_path, params, delta, workers, engine,
            ray_address, embed_cache, check_timeout, resume, no_progress, as_json) -> None:
    """Generate a suite's labelled scenarios, run every detector over them, write a scoreboard."""
    from scenarios.base import FAMILIES
    from scenarios.suites import SuiteError, load_suite

    from .runner import RunConfig, run
    from .scoring import DELTA

    config = load_config(config_path)
    rc = config.get("run", {})
    if resume and not (out or rc.get("out")):
        raise LoopbenchError("--resume needs --out RUN, the folder of the interrupted run")
    try:
        s = load_suite(suite or rc.get("suite", "default"))
    except SuiteError as exc:
        raise LoopbenchError(str(exc)) from None
    fams = _split(families) or list(rc.get("families", [])) or s.families
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        raise LoopbenchError(f"unknown scenario families: {', '.join(unknown)} (see `loopbench list`)")
    names = _split(detectors_opt) or list(rc.get("detectors", [])) or s.detectors or _default_detectors()
    specs = detector_specs(names, config, params)
    eng = make_engine(engine, workers, ray_address)
    cfg = RunConfig(
        suite=s, detectors=specs, families=fams,
        episodes=episodes or int(rc.get("episodes", s.episodes)),
        seed=seed if seed is not None else int(rc.get("seed", s.seed)),
        mode=mode or rc.get("mode", s.mode), delta=delta if delta is not None else int(rc.get("delta", DELTA)),
        out=_out_dir(out or rc.get("out"), s.name), progress=not no_progress and not as_json, engine=eng,
        check_timeout=_timeout(check_timeout if check_timeout is not None else rc.get("check_timeout")), resume=resume,
    )
    set_embed_cache(embed_cache)
    log = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
    from .checkpoint import ResumeError
    from .engines import EngineError

    try:
        with _interruptible():
            summary = run(cfg, log=log)
    except (ResumeError, EngineError) as exc:
        raise LoopbenchError(str(exc)) from None
    except KeyboardInterrupt as exc:
        click.echo(f"loopbench: interrupted; finished detector tasks are kept in {cfg.out}/.parts; "
                   f"resume with: {_resume_command(cfg.out)}", err=True)
        sys.exit(EXIT_SIGTERM if isinstance(exc, _Terminated) else EXIT_SIGINT)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        click.echo((Path(summary["out"]) / "scoreboard.md").read_text())
        click.echo(f"Run folder: {summary['out']} ({summary['wall_seconds']} s)")


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C but reported with its own exit code."""


class _interruptible:
    """SIGTERM raises ``_Terminated`` in the main thread while the block runs (Ctrl-C already
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
        raise _Terminated()

    def __exit__(self, *exc):
        import signal

        if self._prev is not None:
            signal.signal(signal.SIGTERM, self._prev)


def _timeout(value: Any) -> float | None:
    from .watchdog import DEFAULT_CHECK_TIMEOUT

    if value is None:
        return DEFAULT_CHECK_TIMEOUT
    return float(value) or None


def _resume_command(out: Path) -> str:
    """The command line that finishes this run: the same options, with ``--resume --out``."""
    import shlex

    argv = sys.argv[1:]
    if not argv or argv[0] != "run":
        return f"loopbench run --resume --out {shlex.quote(str(out))} (with this run's other options)"
    args = [a for a in argv[1:] if a != "--resume"]
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return shlex.join(["loopbench", "run", *args, "--resume"])


@main.command("replay")
@click.argument("files", nargs=-1, required=True)
@click.option("--detectors", "detectors_opt", default=None, help="Comma-separated detectors. [default: all registered]")
@click.option("--format", "fmt", default="trace", help="Input format: trace (SPEC §6 JSON Lines) or an importer's name.")
@click.option("--out", default=None, help="Run folder. [default: runs/replay-TIMESTAMP]")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE (repeatable).")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@click.option("--check-timeout", type=click.FloatRange(0), default=None, help="Seconds a detector call may take before its episode fails; 0 = no limit. [default: 5]")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
def replay_cmd(files, detectors_opt, fmt, out, config_path, params, delta, check_timeout, no_progress, as_json) -> None:
    """Run detectors over recorded traces and report where each would have fired."""
    from .replay import load_traces, replay
    from .scoring import DELTA
    from .trace import TraceError

    config = load_config(config_path)
    specs = detector_specs(_split(detectors_opt) or _default_detectors(), config, params)
    if fmt != "trace":
        try:
            from scenarios.importers import FORMATS
        except ImportError:
            FORMATS = {}
        if fmt not in FORMATS:
            raise LoopbenchError(f"unknown --format {fmt!r} (known: trace{''.join(', ' + f for f in sorted(FORMATS))})")
    paths = [Path(f) for f in files]
    try:
        episodes, problems, warnings = load_traces(paths, fmt)
    except (TraceError, OSError) as exc:
        raise LoopbenchError(str(exc)) from None
    if not episodes and len(problems) == 1:
        raise LoopbenchError(problems[0])  # e.g. the one file given is empty: one line says it
    _report_problems(problems)
    for w in warnings[:20]:
        click.echo(f"loopbench: warning: {w}", err=True)
    if not episodes:
        raise LoopbenchError(f"no usable episodes in {', '.join(files)} ({len(problems)} records skipped)")
    summary = replay(episodes, specs, _out_dir(out, "replay"), [str(p) for p in paths],
                     delta if delta is not None else DELTA, progress=not no_progress and not as_json,
                     check_timeout=_timeout(check_timeout))
    summary["skipped_records"] = len(problems)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        click.echo((Path(summary["out"]) / "scoreboard.md").read_text())
        for r in summary["fires"]:
            if r["family"] == "all":
                click.echo(f"{r['detector']:16s} fires on {r['fired']}/{r['traces']} traces")
        click.echo(f"Run folder: {summary['out']}")
    if problems:
        sys.exit(EXIT_SKIPPED)


@main.command("import")
@click.argument("file")
@click.option("--format", "fmt", required=True, help="Source format: openai, tau-bench, react-log, magentic-one, captain-agent.")
@click.option("-o", "--out", "out_path", required=True, help="Output trace file (JSON Lines, SPEC §6).")
def import_cmd(file, fmt, out_path) -> None:
    """Convert a real agent-trace file (or folder) into the loopbench trace format."""
    from scenarios.importers import FORMATS, convert

    from .trace import TraceError

    if fmt not in FORMATS:
        raise LoopbenchError(f"unknown --format {fmt!r} (known: {', '.join(sorted(FORMATS))})")
    if not Path(file).exists():
        raise LoopbenchError(f"{file}: no such file or directory")
    try:
        n, problems = convert(fmt, file, out_path)
    except (TraceError, OSError, ValueError) as exc:
        raise LoopbenchError(str(exc).splitlines()[0]) from None
    _report_problems(problems)
    if n == 0:
        raise LoopbenchError(f"{file}: no {fmt} episodes found (for a folder, only its own files are read)")
    click.echo(f"wrote {n} episodes to {out_path}", err=True)
    if problems:
        sys.exit(EXIT_SKIPPED)


# Command groups that live in their own modules register themselves on `main`.
from . import cli_families, cli_gate, cli_report, cli_tune  # noqa: E402,F401


if __name__ == "__main__":
    main()
