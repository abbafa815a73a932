"""The loop guard's cost per tool call inside each framework, against the framework's own.

For pydantic-ai, the OpenAI Agents SDK and LangChain (LangGraph), a scripted model makes
--calls distinct tool calls (each with a different result, so the guard allows every one)
and then answers; the tool returns at once. Each run is timed with and without the guard
installed through its adapter (progress_guard, defaults), best of --repeat runs each:

  framework per call = run time without the guard / calls (model step + tool dispatch + bookkeeping)
  guard per call     = (run time with the guard - without) / calls
  ratio              = guard per call / framework per call

With --closed-loop SUITE, only: the suite's linear scenarios in closed loop, played by the
built-in harness and through each framework's real agent loop (``sim.play.frameworks``, what
``loopbench run --harness`` plays), per detector ('none': no guard): the summed closed-loop
figures of each harness, how many plays are identical to the built-in harness's, and every
difference counted by the documented framework behaviour that explains it
(``reasons_to_differ``; UNEXPLAINED would be a defect). Branching scenarios are left out.

Run: python bench/bench_adapters.py [--calls 100] [--repeat 5] [--frameworks pydantic-ai,openai-agents,langchain]
     python bench/bench_adapters.py --closed-loop quick [--detectors none,progress_guard,exact] [--frameworks ...]
"""
from __future__ import annotations

import argparse
import asyncio
import time
import zlib
from typing import Callable


WORDS = ("revenue", "churn", "latency", "invoice", "roadmap", "hiring", "outage", "pricing", "refund", "audit",
         "budget", "vendor", "backlog", "migration", "security", "onboarding", "forecast", "contract", "support", "launch")


def script(calls: int) -> list[tuple[str, dict]]:
    """Distinct requests (every pair of words once), so a healthy run: the guard allows each."""
    pairs = [(a, b) for a in WORDS for b in WORDS if a != b]
    return [("search", {"query": f"{pairs[i][0]} {pairs[i][1]} report"}) for i in range(calls)]


async def search(query: str) -> str:
    """Search the documents."""
    return f"[D{zlib.crc32(query.encode()) % 997}] {query.title()}: figures for {query.split()[1]} ..."


def pydantic_ai_run(calls: int, guarded: bool) -> Callable[[], None]:
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from adapters.pydantic_ai import LoopGuardToolset

    steps = script(calls)

    def respond(messages, info):
        n = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
        if n >= len(steps):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(steps[n][0], steps[n][1], tool_call_id=f"c{n}")])

    tools = FunctionToolset([search])
    agent = Agent(FunctionModel(respond), toolsets=[LoopGuardToolset(tools) if guarded else tools])
    limits = UsageLimits(request_limit=calls + 5)
    return lambda: agent.run_sync("go", usage_limits=limits)


def openai_agents_run(calls: int, guarded: bool) -> Callable[[], None]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from adapters.openai_agents import guard_tools

    def run():
        model = ScriptedModel([[function_call(t, a, call_id=f"c{i}")] for i, (t, a) in enumerate(script(calls))]
                              + [[assistant_message("done")]])
        tools = [function_tool(search)]
        agent = Agent(name="bench", model=model, tools=guard_tools(tools) if guarded else tools)
        asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True), max_turns=calls + 5))

    return run


def langchain_run(calls: int, guarded: bool) -> Callable[[], None]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from adapters.langchain import LoopGuardMiddleware

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            return self

    def run():
        msgs = [AIMessage("", tool_calls=[{"name": t, "args": a, "id": f"c{i}"}]) for i, (t, a) in enumerate(script(calls))]
        agent = create_agent(Scripted(messages=iter(msgs + [AIMessage("done")])), [tool(search)],
                             middleware=[LoopGuardMiddleware()] if guarded else [])
        asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]},
                                  {"recursion_limit": 2 * calls + 10}))

    return run


FRAMEWORKS = {"pydantic-ai": pydantic_ai_run, "openai-agents": openai_agents_run, "langchain": langchain_run}


def best(fn: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def closed_loop(suite_name: str, detectors: list[str], harnesses: list[str]) -> None:
    from collections import Counter

    from detectors.registry import make_detector
    from scenarios.suites import load_suite
    from sim.execute.runner import build_scenarios
    from sim.play.frameworks import linear, play_run, reasons_to_differ
    from sim.play.harness import simulate

    suite = load_suite(suite_name)
    scenarios = build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params, suite.family_weights)
    played = [sc for sc in scenarios if linear(sc)]
    print(f"suite {suite_name}: {len(scenarios)} scenarios, seed {suite.seed}; {len(played)} linear ones played in "
          f"every harness ({len(scenarios) - len(played)} branching left out)")
    print(f"{'detector':<16} {'harness':<14} {'identical':>9} {'success':>7} {'executed':>8} {'wasted':>6} "
          f"{'interv.':>7} {'false':>5} {'pruned/stopped/budget':>21} {'s':>5}  differences by reason")

    def line(name, harness, stats, same, secs, why=""):
        ended = [sum(s.ended == e for s in stats) for e in ("pruned", "stopped", "budget")]
        print(f"{name:<16} {harness:<14} {same:>9} {sum(s.success for s in stats):>7} "
              f"{sum(s.executed for s in stats):>8} {sum(s.wasted_calls for s in stats):>6} "
              f"{sum(sum(s.interventions.values()) for s in stats):>7} {sum(s.false_interventions for s in stats):>5} "
              f"{'/'.join(map(str, ended)):>21} {secs:>5.1f}  {why}")

    def key(s):
        return (s.ended, s.success, s.executed, s.wasted_calls, round(s.spend, 9), dict(s.interventions),
                s.false_interventions)

    for name in detectors:
        t0 = time.perf_counter()
        builtin = [simulate(sc, make_detector(name) if name != "none" else None) for sc in played]
        line(name, "builtin", [r.stats for r in builtin], "", time.perf_counter() - t0)
        for harness in harnesses:
            t0 = time.perf_counter()
            runs = [play_run(harness, sc, make_detector(name) if name != "none" else None) for sc in played]
            stats = [r.stats for r in runs]
            secs = time.perf_counter() - t0
            why: Counter = Counter()
            for fw, bi in zip(runs, builtin):
                if key(fw.stats) != key(bi.stats):
                    why["+".join(reasons_to_differ(harness, bi, fw)) or "UNEXPLAINED"] += 1
            same = sum(key(fw) == key(bi.stats) for fw, bi in zip(stats, builtin))
            line(name, harness, stats, f"{same}/{len(played)}", secs, ", ".join(f"{k} {v}" for k, v in sorted(why.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--closed-loop", metavar="SUITE")
    ap.add_argument("--detectors", default="none,progress_guard,exact,gemini_cli,max_turns,planner",
                    help="with --closed-loop; 'none' plays without a guard")
    args = ap.parse_args()
    if args.closed_loop:
        closed_loop(args.closed_loop, args.detectors.split(","), args.frameworks.split(","))
        return
    print(f"{'framework':<14} {'calls':>5} {'framework/call':>15} {'guard/call':>11} {'ratio':>6}")
    for name in args.frameworks.split(","):
        plain, guarded = FRAMEWORKS[name](args.calls, False), FRAMEWORKS[name](args.calls, True)
        plain(), guarded()  # warm-up: imports, schemas, the guard's first use
        base = best(plain, args.repeat)
        with_guard = best(guarded, args.repeat)
        per_call = base / args.calls
        guard = (with_guard - base) / args.calls
        print(f"{name:<14} {args.calls:>5} {per_call * 1e6:>12.0f} us {guard * 1e6:>8.0f} us {guard / per_call:>6.2f}")


if __name__ == "__main__":
    main()
