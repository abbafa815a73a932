"""The drop-in guard API (its OpenAI-style example in docs/detectors.md runs in the docs test)."""
from detectors.guard import LoopGuard
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Verdict

def test_nudge_then_stop_and_a_compliant_agent_is_not_stopped_on_stale_evidence():
    g = LoopGuard(semantic=False)
    g.record("read_file", {"path": "a.py"}, "alpha beta")
    d = g.check("read_file", {"path": "./a.py"})
    assert d.verdict is Verdict.NUDGE and "already ran" in d.message
    g.record("read_file", {"path": "./a.py"}, d.message)
    # The agent changes course and makes progress...
    g.record("read_file", {"path": "b.py"}, "gamma delta")
    g.record("search", {"query": "epsilon"}, "zeta eta")
    # ...so a later alarm nudges again instead of stopping on the old strike.
    assert g.check("read_file", {"path": "b.py"}).verdict is Verdict.NUDGE
    # Stubborn after that nudge: the next alarm stops, with a machine-readable reason.
    g.record("read_file", {"path": "b.py"}, None)
    d = g.check("read_file", {"path": "b.py"})
    assert d.verdict is Verdict.STOP and d.reason.startswith("loop-guard: signature")
    assert d.events[0][0] == "loop:detected" and d.events[0][1]["tier"] == "stop"


def test_progress_is_not_a_loop():
    g = LoopGuard(semantic=False)
    # polling whose answer changes
    for pct in (10, 40, 70):
        assert g.check("check_status", {"job_id": "j"}).verdict is Verdict.ALLOW
        g.record("check_status", {"job_id": "j"}, f"running {pct}%")
    # edit then re-test
    g.record("run_tests", {}, "2 failed", error=True)
    g.record("write_file", {"path": "a.py", "content": "fix"}, "wrote 3 bytes")
    assert g.check("run_tests", {}).verdict is Verdict.ALLOW
    # a retry after a transient error
    g.record("http_get", {"url": "https://x/y"}, "503 Service Unavailable", error=True)
    assert g.check("http_get", {"url": "https://x/y"}).verdict is Verdict.ALLOW


def test_same_error_with_other_arguments_is_a_loop():
    g = LoopGuard(semantic=False)
    for i in range(2):
        g.record("http_get", {"url": f"https://api/{i}"}, f"401 Unauthorized (request {i})", error=True)
    d = g.check("http_get", {"url": "https://api/9"})
    assert d.verdict is Verdict.NUDGE and "same error" in d.message


def test_per_tool_overrides_and_fork():
    g = LoopGuard(ProgressGuard(semantic=False, tool_overrides={"calc": {"exempt": True}}))
    g.record("calc", {"expression": "1+1"}, "2")
    assert g.check("calc", {"expression": "1+1"}).verdict is Verdict.ALLOW
    g.record("search", {"query": "x"}, "found x")
    left, right = g.fork(), g.fork()
    left.record("search", {"query": "y"}, "found y")
    assert right.check("search", {"query": "y"}).verdict is Verdict.ALLOW
    assert left.check("search", {"query": "y"}).verdict is Verdict.NUDGE
