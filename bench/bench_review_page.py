"""Load time of the labelling review page with many traces, in headless chromium.

Builds N seeded synthetic traces (10-40 calls, results of 100-3000 characters, some
repeats), labels them, writes the page, then opens it in Debian's chromium through
Playwright and reports: page size, Python labelling and render time, and the browser's
time from navigation start to the first trace shown and selected (target < 2 s for
1,000 traces; median of --repeat loads). Optionally saves a screenshot.

    python bench/bench_review_page.py [--traces 1000] [--repeat 3] [--screenshot /tmp/review.png]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from detectors.protocol import Observation, ToolCall  # noqa: E402
from scenarios.labeling import label_episodes  # noqa: E402
from scenarios.review_page import write_review_page  # noqa: E402
from scenarios.tree import Episode, ToolNode  # noqa: E402

WORDS = ("flight hotel price Oslo Paris booking reservation seat window aisle refund policy baggage "
         "status delayed cancelled gate terminal passenger loyalty upgrade economy business").split()


def synthetic(n: int, seed: int = 7) -> list[Episode]:
    rng = random.Random(seed)
    eps = []
    for e in range(n):
        ep = Episode(f"trace-{e:04d}")
        parent = None
        calls: list[tuple[str, dict, str]] = []
        for k in range(rng.randint(10, 40)):
            if calls and rng.random() < 0.08:
                tool, args, res = rng.choice(calls)  # a repeat, sometimes with the same result
                if rng.random() < 0.5:
                    res = res + " " + rng.choice(WORDS)
            else:
                tool = rng.choice(("search", "get_details", "lookup", "update", "read_page"))
                args = {"query": " ".join(rng.choices(WORDS, k=rng.randint(2, 6))), "page": rng.randint(1, 5)}
                res = " ".join(rng.choices(WORDS, k=rng.randint(15, 400)))
            calls.append((tool, args, res))
            nid = f"c{k}"
            ep.add(ToolNode(nid, parent, ToolCall(tool, args, nid), Observation(res, False)))
            parent = nid
        eps.append(ep)
    return eps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--screenshot", type=Path, default=None)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    eps = synthetic(a.traces)
    t0 = time.perf_counter()
    _, proposals = label_episodes(eps)
    t1 = time.perf_counter()
    ordered = sorted(proposals, key=lambda p: (p.confidence, p.episode))
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "review.html"
        write_review_page(page_path, [p.to_dict() for p in ordered], title=f"{a.traces} synthetic traces")
        t2 = time.perf_counter()
        calls = sum(p.n_calls for p in proposals)
        print(f"{a.traces} traces, {calls} calls: labelled in {t1 - t0:.2f} s, page written in {t2 - t1:.2f} s, "
              f"{page_path.stat().st_size / 1e6:.1f} MB")
        loads = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=a.chromium, headless=True, args=["--no-sandbox"])
            for i in range(a.repeat):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(page_path.as_uri(), wait_until="load")
                page.wait_for_selector("section.trace.current ol.calls")
                ms = page.evaluate("performance.now()")  # since navigation start
                loads.append(ms / 1000)
                shown = page.locator("section.trace").count()
                if i == 0 and a.screenshot is not None:
                    # Show the first proposed loop: its onset, evidence and opened result.
                    first_loop = next((k for k, p in enumerate(ordered) if p.loops), 0)
                    for _ in range(first_loop):
                        page.keyboard.press("j")
                    page.wait_for_selector("section.trace.current li.onset")
                    page.keyboard.press("o")
                    page.locator("section.trace.current li.onset").scroll_into_view_if_needed()
                    page.screenshot(path=str(a.screenshot))
                page.close()
            browser.close()
        print(f"browser load to first trace selected: median {statistics.median(loads):.2f} s "
              f"(runs: {', '.join(f'{x:.2f}' for x in loads)}), {shown} trace sections; target < 2 s: "
              f"{'met' if statistics.median(loads) < 2 else 'NOT met'}")
        if a.screenshot is not None:
            print(f"screenshot: {a.screenshot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
