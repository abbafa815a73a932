"""Episodes as trees of ThinkNodes and ToolNodes, and the paths through them.

Every node has one parent (``None`` at the root). A ThinkNode is a model turn (or a
harness/user message); a ToolNode is one executed tool call with its observation.
When a turn *branches*, each proposed call is a child of that turn and starts its own
path; when it *joins*, its calls run one after another on a single path and all
their results feed the next turn. A plain ReAct transcript is a chain.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from detectors.protocol import Message, Observation, ToolCall


@dataclass(frozen=True, slots=True)
class Label:
    """Ground truth for one proposed call: redundant (``loop``) or not, and the loop kind."""

    loop: bool
    kind: str | None = None


@dataclass(slots=True)
class ThinkNode:
    id: str
    parent: str | None
    message: Message


@dataclass(slots=True)
class ToolNode:
    """One proposed call. ``observation`` is ``None`` when the call never ran (pruned,
    blocked); a call that ran without a recorded result has ``recorded=False``
    (``detectors.protocol.UNRECORDED``)."""

    id: str
    parent: str | None
    call: ToolCall
    observation: Observation | None
    label: Label | None = None
    # Simulation-side accounting: never shown to a detector.
    price: float = 0.0
    tokens: int = 0


Node = ThinkNode | ToolNode


@dataclass
class Episode:
    """One agent run. ``nodes`` are in execution (trace) order: parents before children."""

    id: str
    family: str = "replay"
    seed: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[str, Node] | None = None
        self._children: dict[str | None, list[str]] | None = None
        self._tools: list[ToolNode] | None = None

    # -- structure ---------------------------------------------------------------------
    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        self._index = self._children = self._tools = None
        return node

    @property
    def by_id(self) -> dict[str, Node]:
        if self._index is None:
            self._index = {n.id: n for n in self.nodes}
        return self._index

    @property
    def children(self) -> dict[str | None, list[str]]:
        if self._children is None:
            kids: dict[str | None, list[str]] = {}
            for n in self.nodes:
                kids.setdefault(n.parent, []).append(n.id)
            self._children = kids
        return self._children

    def tool_nodes(self) -> list[ToolNode]:
        """The ToolNodes in trace order (kept until the next ``add``; do not mutate it)."""
        if self._tools is None:
            self._tools = [n for n in self.nodes if isinstance(n, ToolNode)]
        return self._tools

    def call_index(self) -> dict[str, int]:
        """0-based order of each ToolNode among the episode's tool calls, as in its trace."""
        return {n.id: i for i, n in enumerate(self.tool_nodes())}

    def path_to(self, node_id: str) -> list[Node]:
        path: list[Node] = []
        by_id = self.by_id
        cur: str | None = node_id
        while cur is not None:
            node = by_id[cur]
            path.append(node)
            cur = node.parent
        path.reverse()
        return path

    def leaves(self) -> list[str]:
        kids = self.children
        return [n.id for n in self.nodes if n.id not in kids]

    def paths(self) -> Iterator[list[Node]]:
        """Every root-to-leaf path."""
        for leaf in self.leaves():
            yield self.path_to(leaf)

    def is_linear(self) -> bool:
        return all(len(v) <= 1 for v in self.children.values())

    @property
    def labelled(self) -> bool:
        return any(n.label is not None for n in self.tool_nodes())

    @property
    def looping(self) -> bool:
        return any(n.label is not None and n.label.loop for n in self.tool_nodes())


def linear_episode(episode_id: str, steps: list[tuple], family: str = "replay") -> Episode:
    """Build a chain from ``(tool, args[, content[, error[, loop]]])`` tuples; a test helper.

    ``loop`` (bool) labels the call; omit it for an unlabelled trace. ``content`` may be an
    ``Observation`` (``UNRECORDED`` for a call that ran without a recorded result), used as
    it is.
    """
    ep = Episode(episode_id, family=family)
    parent: str | None = None
    for i, step in enumerate(steps):
        tool, args, *rest = step
        content = rest[0] if len(rest) > 0 else f"result {i}"
        error = rest[1] if len(rest) > 1 else False
        label = Label(bool(rest[2]), "stale" if rest[2] else None) if len(rest) > 2 else None
        node_id = f"c{i}"
        obs = content if isinstance(content, Observation) else Observation(content, error)
        ep.add(ToolNode(node_id, parent, ToolCall(tool, args, call_id=node_id), obs, label))
        parent = node_id
    return ep
