"""``calls.csv`` is put together from ready-made CSV pieces (``sim.execute.rows.open_rows``):
byte for byte what ``csv`` writes cell by cell, whatever the trace's ids and names hold."""
import csv
import io

from detectors.exact import ExactDetector
from detectors.protocol import Observation, ToolCall
from scenarios.tree import Episode, Label, ToolNode
from sim.execute.rows import CALL_COLUMNS
from sim.execute.runner import evaluate_open
from sim.files import cells_text, fmt, write_lines
from sim.scoring.outcomes import VERDICT_TEXT, load_profiles

HOSTILE = ['plain', 'a,b', 'say "hi"', 'line\nbreak', 'cr\rhere', 'crlf\r\nhere', '', ' ', '"', '=1+1', 'é,ü 🚀']


def hostile_episode() -> Episode:
    ep = Episode('ep,"1"\nx', family='fam,"ily"')
    parent = None
    for i, text in enumerate(HOSTILE):
        node = f"n{i}{text}"
        tool = text or "t"
        ep.add(ToolNode(node, parent, ToolCall(tool, {"q": "same"}, f"call{i}{text}"), Observation("result"),
                        Label(i % 2 == 0, f"stale{text}" if i % 2 == 0 else None), tokens=10 * i))
        parent = node
    return ep


def test_calls_csv_is_what_csv_writes_cell_by_cell(tmp_path):
    ep = hostile_episode()
    label = 'exact,"v2"'
    _, _, calls, _, errors = evaluate_open([(label, ExactDetector())], [ep], 5, load_profiles()[1])
    assert errors == {label: 0}
    write_lines(tmp_path / "calls.csv", calls, CALL_COLUMNS)
    written = (tmp_path / "calls.csv").read_bytes().decode("utf-8")  # no newline translation
    rows = list(csv.reader(io.StringIO(written, newline="")))
    assert rows[0] == CALL_COLUMNS and len(rows) == 1 + len(HOSTILE)
    nodes = ep.tool_nodes()
    expected = []
    for (i, node), row in zip(enumerate(nodes), rows[1:]):
        # The verdict and score are the detector's; everything else is the trace's own text.
        assert row[:8] == [label, ep.id, ep.family, node.call.call_id, node.id, str(i), str(i), node.call.tool]
        assert row[10:] == [fmt(node.label.loop), fmt(node.label.kind), str(node.tokens)]
        assert row[9] in VERDICT_TEXT.values()
        expected.append(row)
    # The same bytes as the csv module writing each cell.
    assert written == cells_text(expected, CALL_COLUMNS)


def test_a_bare_carriage_return_is_quoted_in_every_result_file(tmp_path):
    """The csv module, ending lines with "\\n", would write a field holding a bare "\\r" unquoted,
    and readers (csv, pandas) would split the row there."""
    import pandas as pd

    from sim.files import write_csv

    rows = [{"episode": "a\rb", "n": 1}, {"episode": "plain", "n": 2}, {"episode": "c\r\nd", "n": 3}]
    write_csv(tmp_path / "t.csv", rows, ["episode", "n"])
    raw = (tmp_path / "t.csv").read_bytes()
    assert raw == b'episode,n\n"a\rb",1\nplain,2\n"c\r\nd",3\n'
    back = pd.read_csv(tmp_path / "t.csv", keep_default_na=False)
    assert back["episode"].tolist() == ["a\rb", "plain", "c\r\nd"] and back["n"].tolist() == [1, 2, 3]
