"""``openhands``: the OpenHands V0 controller's ``StuckDetector`` — a hard stop, no nudge."""
from __future__ import annotations

from typing import Sequence

from ..protocol import Decision, Verdict
from ._openhands import Finding, History, OpenHandsBase

#: The error OpenHands raises into the controller (``AgentStuckInLoopError``).
STUCK_TEXT = "Agent got stuck in a loop"

#: Tool names whose observations OpenHands compares by command and exit code only.
#: Tool names of IPython cells (OpenHands' ``IPythonRunCellAction``).
IPYTHON_TOOLS = ("execute_ipython_cell",)

SHELL_TOOLS = ("bash", "execute_bash", "shell", "terminal", "run_command", "execute_command", "cmd", "exec")


class OpenHandsDetector(OpenHandsBase):
    """Stop the agent when its recent history matches one of V0's hard-coded stuck patterns.

    Checked before every agent step from the history alone, so the alarm lands on the
    next proposed call whatever that call is:

    1. ``repeating_action_observation``: the last **4** actions equal and the last 4
       observations equal;
    2. ``repeating_action_error``: the last **3** actions equal and the last 3
       observations all errors (the error texts may differ);
    3. ``monologue``: the last **3** standalone agent messages identical, with no
       observation between them;
    4. ``repeating_action_observation_pattern``: the last **6** actions and 6
       observations alternate A,B,A,B,A,B.

    Nothing is checked below 3 events. **Equality**: actions by tool + sorted-key
    arguments and — as in OpenHands' dataclass equality — the agent's ``thought``: the
    text of the model turn that proposed the call (``compare_thought``), so a reworded
    thought makes two identical commands different. Observations by full content and
    error flag, except for ``shell_tools``, whose observations are compared by command and
    exit code only (the exit code is our error flag): the output text is ignored, so
    repeated shell polling looks stuck after 4 steps while the same polling through a
    dedicated tool (``check_status``) whose answer changes does not. A harness that runs
    its checks through the shell lists those tools in ``shell_tools``.

    **Window**: ``headless_mode`` (the default, as in evals and automation) reads the
    whole history and ignores user messages; interactive mode only reads events after the
    last user message. **Intervention**: ``AgentStuckInLoopError`` puts the agent in an
    error state → ``stop``; the event carries ``loop_type``, ``loop_repeat_times`` and
    ``loop_start_idx`` (a path call index) as OpenHands' ``StuckAnalysis`` does.

    The score is the largest ratio of a pattern's current length to its threshold, so
    the detector alarms iff ``score >= 1``.

    **IPython cells** (``ipython_tools``, calls with a ``code`` argument): cells that call
    ``edit_file_by_replace(`` are equal when they have more than two lines and the first
    three match (thought ignored); and three repeats of a cell whose outputs carry the
    same kernel syntax error (unterminated string with the same error line; invalid
    syntax / incomplete input with the same "Cell In[1], line N" first line and error
    line, at least 6 lines, kernel footer present) count as ``repeating_action_error``
    although the outputs are not error observations.

    **Left out**: pattern 5 (context-window error: back-to-back condensation events, which
    our traces do not have) and a stuck delegate propagating to its parent. A standalone
    agent message is a model turn that proposed no call; the monologue can only be
    reported on the next proposed call.

    >>> from detectors.protocol import Observation, ToolCall
    >>> det = OpenHandsDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(5):
    ...     call = ToolCall("read_file", {"path": "a.py"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same text"))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'allow', 'allow', 'stop']
    """

    action_observation = 4
    action_error = 3
    monologue = 3
    alternating_pattern = 6
    max_events = None

    def __init__(self, *, headless_mode: bool = True, compare_thought: bool = True, shell_tools: Sequence[str] = SHELL_TOOLS,
                 ipython_tools: Sequence[str] = IPYTHON_TOOLS):
        self.headless_mode = headless_mode
        self.compare_thought = compare_thought
        self.shell_tools = tuple(shell_tools)
        self.ipython_tools = tuple(ipython_tools)
        self._shell_tools = frozenset(self.shell_tools)
        self._ipython_tools = frozenset(self.ipython_tools)
        self._user_resets = not headless_mode
        self._setup()

    def decide(self, state: History, finding: Finding) -> Decision:
        return Decision(Verdict.STOP, finding.score, reason=f"{STUCK_TEXT} ({finding.loop_type})",
                        events=(self.stuck_event(finding),))
