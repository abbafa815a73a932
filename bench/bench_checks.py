"""Per-check cost of every detector, next to the floor of canonicalising and hashing once.

Prints, on this machine and Python:
  1. the floor: orjson with sorted keys, xxh3 over it, the standard library's
     json.dumps(sort_keys=True), and a pure-Python djb2 over that string;
  2. each detector's median check() time and check()+record() time on typical
     arguments after a 20-call path, with the ratio to the floor;
  3. how exact and normalized grow with argument size (10 B .. 100 KB) and every
     detector with path length (10 .. 10,000 calls);
  4. with --suite NAME, only: check()+record() of each detector over that suite's
     episodes, replayed in open loop as `loopbench run` times them (p50, p95, mean of
     the wall-clock time, and of the thread's CPU time, which other load on the machine
     inflates less), best of --repeat passes, each on a fresh detector;
  5. with --breakdown NAME, only: where progress_guard's check()+record() time goes over that
     suite: calls by whether their arguments and their result text are new to the run, the
     CPU p50 of each kind, check() alone (what a harness waits for before the tool runs;
     record() reads the result after it), and the same call checked and recorded again at
     once (an equal call object, so every memo hits: the cost of the state update alone).
Run: python bench/bench_checks.py [--quick] [--detectors a,b] [--suite default [--repeat 3]] [--breakdown default]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import orjson
import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code, not an installed copy

from detectors.protocol import Observation, ToolCall  # noqa: E402
from detectors.registry import available, make_detector  # noqa: E402

TYPICAL = {"query": "q3 revenue europe", "limit": 10, "filters": {"region": "emea", "year": 2024}, "include_drafts": False}


def per_op(fn, number: int, repeat: int) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` batches of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        times.append((time.perf_counter_ns() - t0) / number)
    return statistics.median(times) / 1e9


def djb2(text: str) -> int:
    h = 5381
    for ch in text:
        h = ((h << 5) + h + ord(ch)) & 0xFFFFFFFF
    return h


def floor(number: int, repeat: int) -> dict[str, float]:
    opt = orjson.OPT_SORT_KEYS
    blob = orjson.dumps(TYPICAL, option=opt)
    text = json.dumps(TYPICAL, sort_keys=True)
    return {
        "orjson sort_keys": per_op(lambda: orjson.dumps(TYPICAL, option=opt), number, repeat),
        "xxh3_64 of that": per_op(lambda: xxhash.xxh3_64_intdigest(blob), number, repeat),
        "orjson + xxh3 (the floor)": per_op(lambda: xxhash.xxh3_64_intdigest(orjson.dumps(TYPICAL, option=opt)), number, repeat),
        "json.dumps(sort_keys=True)": per_op(lambda: json.dumps(TYPICAL, sort_keys=True), number, repeat),
        "pure-Python djb2 of that": per_op(lambda: djb2(text), max(1, number // 10), repeat),
    }


def path_state(det, n: int, args_of=lambda i: {"path": f"src/file_{i}.py"}):
    state = det.start()
    for i in range(n):
        call = ToolCall("read_file", args_of(i), f"c{i}")
        # Each file says something new, as on a productive path (no detector is alarmed).
        state = det.record(state, call, det.check(state, call), Observation(f"content of file {i}: topic{i} notes{i}"))
    return state


def fresh_calls(args: dict, n: int) -> list[ToolCall]:
    """Distinct call objects with equal arguments: each check sees a new call, as in a
    harness, so nothing memoised on a call object can flatter the figure."""
    return [ToolCall("search", json.loads(json.dumps(args)), f"x{i}") for i in range(n)]


def per_call(fn, calls: list[ToolCall], repeat: int) -> float:
    """Median seconds per call of ``fn(call)`` over ``repeat`` passes through ``calls``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for c in calls:
            fn(c)
        times.append((time.perf_counter_ns() - t0) / len(calls))
    return statistics.median(times) / 1e9


def detector_cost(name: str, prior: int, args: dict, number: int, repeat: int) -> tuple[float, float]:
    det = make_detector(name)
    state = path_state(det, prior)
    calls = fresh_calls(args, number)
    obs = Observation("3 results for the query")
    check = per_call(lambda c: det.check(state, c), calls, repeat)
    calls = fresh_calls(args, number)
    both = per_call(lambda c: det.record(state, c, det.check(state, c), obs), calls, repeat)
    return check, both


def quantiles(ns: list[int]) -> tuple[float, float, float]:
    """p50, p95 and mean in microseconds, as timings.csv gives them."""
    ns = sorted(ns)
    return ns[len(ns) // 2] / 1e3, ns[min(len(ns) - 1, int(0.95 * len(ns)))] / 1e3, sum(ns) / len(ns) / 1e3


def suite_replay(names: list[str], suite_name: str, repeat: int) -> None:
    """Section 4: each detector's check()+record() over a suite's episodes, open loop."""
    import os

    import scenarios.families  # noqa: F401  (registers the families)
    from scenarios.suites import load_suite
    from sim.execute.runner import build_scenarios, generate_episodes
    from sim.play.openloop import score_episode

    suite = load_suite(suite_name)
    episodes = generate_episodes(build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params,
                                                 suite.family_weights))
    calls = [n.call for ep in episodes for n in ep.tool_nodes()]
    print(f"4. check()+record() over suite {suite_name!r} ({len(episodes)} episodes, {len(calls)} calls), open loop, "
          f"best of {repeat}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"   {'detector':16s} {'wall p50':>9s} {'p95':>8s} {'mean':>8s} {'cpu p50':>9s} {'p95':>8s} {'mean':>8s}")
    for name in names:
        best = None
        for _ in range(repeat):
            det = make_detector(name)
            if hasattr(det, "prefetch"):
                det.prefetch(calls)  # as the runner does: model vectors come from the cache, not the clock
            wall: list[int] = []
            cpu: list[int] = []
            for ep in episodes:
                # score_episode times each call with the wall clock; a second clock around the
                # same calls would time itself too, so the CPU figure comes from a second pass.
                wall.extend(s.ns for s in score_episode(det, ep))
            det = make_detector(name)
            if hasattr(det, "prefetch"):
                det.prefetch(calls)
            for ep in episodes:
                cpu.extend(_cpu_times(det, ep))
            row = quantiles(wall) + quantiles(cpu)
            best = row if best is None or row[0] < best[0] else best
        print(f"   {name:16s}" + "".join(f"{v:8.1f}us" for v in best))


def breakdown(suite_name: str) -> None:
    """Section 5: progress_guard's per-call CPU time by what is new in the call."""
    import scenarios.families  # noqa: F401  (registers the families)
    from detectors.callmemo import args_key
    from detectors.signature import content_text
    from scenarios.suites import load_suite
    from sim.execute.runner import build_scenarios, generate_episodes
    from sim.play.openloop import walk_tree

    suite = load_suite(suite_name)
    episodes = generate_episodes(build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params,
                                                 suite.family_weights))
    det = make_detector("progress_guard")
    det.prefetch([n.call for ep in episodes for n in ep.tool_nodes()])
    clock = time.thread_time_ns
    seen_calls: set = set()
    seen_texts: set = set()
    kinds: dict[str, list[int]] = {}
    first: list[int] = []
    again: list[int] = []
    checks: list[int] = []  # check() alone: what a harness waits for before the tool runs
    def step(state, node):
        call, obs = node.call, node.observation
        key = (call.tool, args_key(call.args))
        text = content_text(obs.content) if obs is not None and obs.content is not None else None
        kind = ("new call" if key not in seen_calls else "known call") + (
            ", new result" if text is not None and text not in seen_texts else ", known result")
        seen_calls.add(key)
        seen_texts.add(text)
        t0 = clock()
        decision = det.check(state, call)
        tc = clock()
        new_state = det.record(state, call, decision, obs)
        t1 = clock()
        checks.append(tc - t0)
        twin = ToolCall(call.tool, call.args, call.call_id, call.step, call.turn)
        t2 = clock()
        det.record(state, twin, det.check(state, twin), obs)
        t3 = clock()
        first.append(t1 - t0)
        again.append(t3 - t2)
        kinds.setdefault(kind, []).append(t1 - t0)
        return new_state

    for ep in episodes:
        walk_tree(det, ep, step)
    n = len(first)
    print(f"5. progress_guard check()+record() CPU time over suite {suite_name!r} ({n} calls), by what is new")
    print(f"   {'calls':32s} {'share':>6s} {'p50':>8s} {'p95':>8s} {'mean':>8s}")
    for kind, ns in sorted(kinds.items()):
        p50, p95, mean = quantiles(ns)
        print(f"   {kind:32s} {len(ns) / n:6.1%} {p50:6.1f}us {p95:6.1f}us {mean:6.1f}us")
    for label, ns in (("all, as run", first), ("  of which check() alone", checks),
                      ("the same call again (memos hit)", again)):
        p50, p95, mean = quantiles(ns)
        print(f"   {label:32s} {1:6.0%} {p50:6.1f}us {p95:6.1f}us {mean:6.1f}us")
    from detectors.result_news import ResultText, mask_volatile

    texts = [t for t in seen_texts if t is not None]
    t0 = clock()
    for t in texts:
        ResultText(mask_volatile(t))
    print(f"   reading a result afresh (mask, tokens, items): {(clock() - t0) / len(texts) / 1e3:.1f} us mean "
          f"over the {len(texts)} distinct result texts; {len(seen_calls)} distinct calls")


def _cpu_times(det, episode) -> list[int]:
    """Thread CPU time of check()+record() per tool call of ``episode``, path by path state."""
    from sim.play.openloop import walk_tree

    clock = time.thread_time_ns
    out = []

    def timed(state, node):
        t0 = clock()
        new_state = det.record(state, node.call, det.check(state, node.call), node.observation)
        out.append(clock() - t0)
        return new_state

    walk_tree(det, episode, timed)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--detectors", default="")
    ap.add_argument("--suite", default="", help="only section 4, over this suite's episodes")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the suite (section 4)")
    ap.add_argument("--breakdown", default="", help="only section 5, over this suite's episodes")
    a = ap.parse_args()
    if a.breakdown:
        breakdown(a.breakdown)
        return
    number, repeat = (300, 7) if a.quick else (2000, 21)
    names = [n for n in (a.detectors.split(",") if a.detectors else available()) if n]
    if a.suite:
        suite_replay(names, a.suite, a.repeat)
        return

    print("1. floor (median per operation)")
    fl = floor(number, repeat)
    for k, v in fl.items():
        print(f"   {k:32s} {v * 1e6:8.3f} us")
    base = fl["orjson + xxh3 (the floor)"]

    print("\n2. per check on typical arguments after a 20-call path (median)")
    print(f"   {'detector':16s} {'check':>10s} {'x floor':>8s} {'check+record':>13s}")
    results = {}
    for name in names:
        if name.startswith("embedding"):
            # Warm the model and the cache first: this measures the check, not the load.
            make_detector(name).prefetch([ToolCall("search", TYPICAL)] + [ToolCall("read_file", {"path": f"src/file_{i}.py"}) for i in range(20)])
        c, b = detector_cost(name, 20, TYPICAL, number, repeat)
        results[name] = c
        print(f"   {name:16s} {c * 1e6:8.3f} us {c / base:7.1f}x {b * 1e6:10.3f} us")
    for target, limit in (("exact", 1.0), ("normalized", 2.0)):
        if target in results:
            v = results[target] * 1e6
            print(f"   target: {target} check <= {limit} us median: {'MET' if v <= limit else 'NOT MET'} ({v:.3f} us)")

    print("\n3a. growth with argument size (check, median)")
    sizes = (10, 100, 1_000, 10_000, 100_000)
    print("   " + f"{'detector':16s}" + "".join(f"{s:>11d}B" for s in sizes))
    for name in [n for n in ("exact", "normalized") if n in names] + [n for n in names if n not in ("exact", "normalized") and not n.startswith("embedding")]:
        row = []
        for s in sizes:
            c, _ = detector_cost(name, 20, {"query": "x" * s, "limit": 3}, max(10, number // (1 + s // 1000)), repeat)
            row.append(c)
        print(f"   {name:16s}" + "".join(f"{v * 1e6:10.2f}us" for v in row))

    print("\n3b. growth with path length (check, median)")
    lengths = (10, 100, 1_000, 10_000)
    print("   " + f"{'detector':16s}" + "".join(f"{n:>10d}" for n in lengths))
    for name in [n for n in names if not n.startswith("embedding")]:
        row = []
        for n in lengths:
            det = make_detector(name)
            state = path_state(det, n)
            row.append(per_call(lambda c: det.check(state, c), fresh_calls(TYPICAL, max(10, number // 4)), repeat))
        print(f"   {name:16s}" + "".join(f"{v * 1e6:8.2f}us" for v in row))


if __name__ == "__main__":
    main()
