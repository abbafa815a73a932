"""The review page in a real headless browser: hostile text stays text, the keyboard flow,
least-confident first, and the export round trip back into the labeller."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scenarios.label_files import label_traces
from scenarios.review_page import packed, render
from scenarios.trace import read_trace, write_trace
from scenarios.tree import linear_episode

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HOSTILE = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">&amp;\u2028'


def _episodes():
    return [
        # confident loop: exact repeat with the identical result
        linear_episode("stale", [("search", {"q": "a"}, "r1"), ("search", {"q": "a"}, "r1"), ("open", {"id": 1}, "x")]),
        # a less confident one: the repeat got no recorded result
        linear_episode("paraphrase", [("ask", {"text": "find the flight price for Oslo"}, "NOK 900"),
                                      ("ask", {"text": "please find the Oslo flight price"}, "NOK 900"),
                                      ("book", {"id": 7}, "booked")]),
        linear_episode("clean", [("read", {"f": "a"}, "A"), ("read", {"f": "b"}, "B")]),
        linear_episode(HOSTILE, [(HOSTILE, {"q": HOSTILE}, HOSTILE), (HOSTILE, {"q": HOSTILE}, HOSTILE)]),
    ]


def test_packed_data_cannot_close_the_script():
    import base64
    import gzip

    text = packed({"x": HOSTILE})
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    assert json.loads(gzip.decompress(base64.b64decode(text))) == {"x": HOSTILE}


def test_render_escapes_the_title():
    page = render([], title=HOSTILE)
    assert "<script>window.__pwned" not in page and "<img" not in page


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("no chromium at /usr/bin/chromium (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, path: Path):
    ctx = browser.new_context(accept_downloads=True)
    page = ctx.new_page()
    dialogs, requests = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "blob:", "data:")) else None)
    page.goto(path.as_uri())
    page.wait_for_selector("section.trace.current")
    return ctx, page, dialogs, requests


def test_hostile_trace_stays_text(tmp_path, browser):
    write_trace(tmp_path / "in.jsonl", _episodes())
    label_traces(tmp_path / "in.jsonl", tmp_path / "out.jsonl", review_html=tmp_path / "r.html")
    assert "__pwned" not in (tmp_path / "r.html").read_text()  # no trace text in the markup at all
    ctx, page, dialogs, requests = _open(browser, tmp_path / "r.html")
    try:
        for i in range(4):  # render every trace's calls and open every result
            page.keyboard.press("j" if i else "k")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert page.evaluate("window.__pwned === undefined")
        assert dialogs == [] and requests == []
        assert page.locator("img").count() == 0
        assert page.locator("script").count() == 2  # the data block and the page's own
        assert page.get_by_text(HOSTILE.replace("\u2028", "")[:40], exact=False).count() >= 1
        eids = page.locator(".eid").all_text_contents()
        assert HOSTILE in eids
    finally:
        ctx.close()


def test_keyboard_flow_export_and_reimport(tmp_path, browser):
    write_trace(tmp_path / "in.jsonl", _episodes())
    label_traces(tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "review.json", tmp_path / "r.html")
    review = json.loads((tmp_path / "review.json").read_text())["traces"]
    confidences = [t["confidence"] for t in review]
    assert confidences == sorted(confidences)  # least confident first
    ctx, page, _, _ = _open(browser, tmp_path / "r.html")
    try:
        assert page.locator(".eid").all_text_contents() == [t["episode"] for t in review]
        order = [t["episode"] for t in review]
        by = {t["episode"]: t for t in review}
        assert by["stale"]["onset"] == 1 and by["clean"]["loops"] is False
        # The current trace shows its calls, the onset highlighted with its evidence.
        page.keyboard.press("k")
        for _ in range(order.index("stale")):
            page.keyboard.press("j")
        cur = page.locator("section.trace.current")
        assert cur.locator(".eid").text_content() == "stale"
        assert cur.locator("li.onset").get_attribute("data-call") == "1"
        assert "repeats call #0" in cur.locator("li.onset .evidence").text_content()
        assert cur.locator("li.onset details").get_attribute("open") is None  # results folded
        page.keyboard.press("o")
        assert cur.locator("li.onset details pre").text_content() == "r1"
        # stale: move the onset down one call, then back up, then accept -> "accepted" at 1
        page.keyboard.press("d")
        assert cur.locator("li.onset").get_attribute("data-call") == "2"
        assert "corrected" in cur.locator("[data-role=decision]").text_content()
        page.keyboard.press("u")
        page.keyboard.press("a")  # accepts and moves on
        # go to 'clean' and correct it: onset at its second call
        for name, keys in (("clean", ["d", "d"]), ("paraphrase", ["c"]), (HOSTILE, ["m"])):
            page.keyboard.press("k")
            for _ in range(len(order)):
                page.keyboard.press("k")
            for _ in range(order.index(name)):
                page.keyboard.press("j")
            assert page.locator("section.trace.current .eid").text_content() == name
            for k in keys:
                page.keyboard.press(k)
        assert page.locator("#status").text_content() == "4 of 4 decided"
        with page.expect_download() as dl:
            page.keyboard.press("e")
        labels_path = tmp_path / "labels.json"
        dl.value.save_as(labels_path)
    finally:
        ctx.close()

    doc = json.loads(labels_path.read_text())
    assert doc["format"] == "loopbench-labels"
    got = {t["episode"]: t for t in doc["traces"]}
    assert got["stale"]["decision"] == "accepted" and got["stale"]["onset"] == 1 and got["stale"]["kind"] == "stale"
    assert got["clean"]["decision"] == "corrected" and got["clean"]["loops"] and got["clean"]["onset"] == 1
    assert got["paraphrase"]["decision"] == "clean" and got["paraphrase"]["loops"] is False
    assert got[HOSTILE]["ambiguous"] is True
    assert all(t["source"] == "human" and len(t["calls_sha1"]) == 40 for t in doc["traces"])

    # Feed the export back: the decisions become the labels, marked as a person's.
    run = label_traces(tmp_path / "in.jsonl", tmp_path / "human.jsonl", labels_path=labels_path)
    assert run.imported == 4 and run.human == 4 and run.problems == []
    eps = {e.id: e for e in read_trace(tmp_path / "human.jsonl").episodes}
    assert [n.label.loop for n in eps["clean"].tool_nodes()] == [False, True]
    assert [n.label.loop for n in eps["paraphrase"].tool_nodes()] == [False, False, False]
    assert eps["clean"].meta["label_source"] == "human" and eps["clean"].meta["label_decision"] == "corrected"

    # A second labelling run never overwrites them.
    again = label_traces(tmp_path / "human.jsonl", tmp_path / "again.jsonl")
    assert again.human == 4 and again.imported == 0
    eps2 = {e.id: e for e in read_trace(tmp_path / "again.jsonl").episodes}
    for eid, ep in eps.items():
        assert [n.label for n in eps2[eid].tool_nodes()] == [n.label for n in ep.tool_nodes()]
