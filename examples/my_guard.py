"""Example detectors for the docs: a user's own guard, as `my_guard:SameToolTwice` or by entry point."""
from detectors import Decision, Detector, Verdict
from detectors.exact import ExactDetector


class SameToolTwice(Detector):
    """Nudge when the same tool is called twice in a row."""

    threshold_param = "limit"

    def __init__(self, *, limit: int = 2):
        self.limit = limit

    def start(self):  # fresh state for an episode
        return (None, 0)

    def check(self, state, call):  # before the call runs; must not mutate state
        last, run = state
        score = run + 1 if call.tool == last else 1
        if score >= self.limit:
            return Decision(Verdict.NUDGE, score, message=f"You called {call.tool} {score} times in a row.")
        return Decision(Verdict.ALLOW, score)

    def record(self, state, call, decision, observation):  # after; returns a NEW state
        last, run = state
        return (call.tool, run + 1 if call.tool == last else 1)


class BetterExact(ExactDetector):
    """A candidate change to `exact`: allow one repeat of any call before pruning."""

    def __init__(self, *, max_repeats_per_signature: int = 2, tool_overrides=None):
        super().__init__(max_repeats_per_signature=max_repeats_per_signature, tool_overrides=tool_overrides)
