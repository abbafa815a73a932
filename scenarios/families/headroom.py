"""Headroom families: the failure classes real traces show where today's guards fail (SPEC §10).

The default suite had no headroom left: the house guard caught every loop of every family
and never fired on a clean one, while on held-out real traces it barely beat an exact-match
hash. Each family here is one class measured on those traces (its docstring names it), and
each takes ``difficulty`` (0..1, or a range ``[lo, hi]`` drawn per episode) that scales what
makes the class hard — result noise, gap length, rewording distance, paging depth — so a
suite can keep ahead of the best guard by raising it. What ``difficulty`` scales is said in
each family's docstring and in docs/scenarios.md.

Labels follow from the world as everywhere else: a loop call gains no fact (a page, record or
result already known on its path), whatever its wording or its result's noise.
"""
from __future__ import annotations

import random
from typing import Any

from detectors.protocol import ToolCall

from ..base import Scenario, family
from ..lexicon import concepts_of
from ..shell import current
from ..text import cosmetic_variants, jaccard, paraphrase, render
from ..webtools import SITES, canonical_url, page_links, page_url
from ..worldtools import request_key, viewports
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, loop_length, span
from .hard_negatives import TREE, finish, start_world
from .loops import COMMON, Stuck, build_looping
from .shell_agent import TEST_COMMANDS, bash, edit_command

#: ``difficulty`` drawn uniformly per episode from this range unless a suite fixes it.
DIFFICULTY = (0.0, 1.0)
#: Real loops of these classes are short (τ-bench: a handful of calls; Magentic-One: five
#: to ten re-delegations), not the 30-50 calls of the SPEC's synthetic loops.
SHORT = {**COMMON, "prefix": (0, 10), "loop_length": (6, 16), "difficulty": DIFFICULTY}


def level(rng: random.Random, p: dict[str, Any]) -> float:
    """This episode's difficulty in [0, 1]: one number, or drawn from ``[lo, hi]``."""
    v = p.get("difficulty", DIFFICULTY)
    lo, hi = (float(v), float(v)) if isinstance(v, (int, float)) else (float(v[0]), float(v[1]))
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"difficulty must lie in [0, 1] (lo <= hi), not {v!r}")
    return lo if lo == hi else rng.uniform(lo, hi)


# -- τ-bench: a failed write, then the identical read again ------------------------------------
_LOCKED_FIELDS = ("flight_date", "origin", "destination", "passenger_name", "fare_class")


@family("failed_write_reread", looping=True, **{**SHORT, "loop_length": (2, 8)})
def failed_write_reread(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """τ-bench airline: a write fails, and the agent re-reads the identical record, identical result, again.

    Real class: held-out τ-bench traces where the guard missed two of eight loops — an
    identical ``get_*`` right after a failed update (a cancelled reservation, a field the
    API will not change), answered with the record as before. The write between the reads
    looks like progress to a guard that resets on writes; it changed nothing. ``difficulty``
    is the chance that each retried write changes its value (a new argument each time,
    still refused), so only the read repeats exactly."""
    d = level(rng, p)

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        ids = list(b.world.record_ids())
        rng.shuffle(ids)
        for rid in ids[:rng.randint(1, 3)]:
            b.add(ToolCall("get_record", {"record_id": rid}), thought=f"Looking up reservation {rid}.")
        b.add_productive(rng.randint(*span(p["prefix"])), tools=("calc", "search"))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        fresh = [r for r in b.world.record_ids() if b.gains(ToolCall("get_record", {"record_id": r}))]
        if not fresh:
            raise ScriptError("no record left to read")
        rid = rng.choice(fresh)
        read = ToolCall("get_record", {"record_id": rid})
        variant = rng.choice(("cancelled", "locked_field"))
        b.add(read, thought=f"Reading reservation {rid}.")
        if variant == "cancelled":  # the answer to the cancellation is the record as a read shows it
            b.add(ToolCall("cancel_record", {"record_id": rid}), thought=f"Cancelling {rid} as the user asked.")
            key = rng.choice(("cabin", "bags", "seats"))
        else:
            key = rng.choice(_LOCKED_FIELDS)
        values = [_value(key, rng) for _ in range(64)]

        def write(i: int) -> ToolCall:
            v = values[i] if rng.random() < d else values[0]
            return ToolCall("update_record", {"record_id": rid, "field": key, "value": v})

        b.add(write(0), thought=f"Now changing {key} on {rid}.")  # the first refusal is news
        n = loop_length(rng, p)
        calls = [read if i % 2 == 0 else write(i) for i in range(n)]
        return Stuck(calls, meta={"variant": variant, "field": key, "difficulty": round(d, 3)})

    return build_looping(rng, p, "failed_write_reread", setup, prefix=prefix)


def _value(key: str, rng: random.Random) -> Any:
    if key == "cabin":
        return rng.choice(("basic", "economy", "business"))
    if key in ("bags", "seats"):
        return rng.randint(0, 4)
    if key == "flight_date":
        return f"2024-05-{rng.randint(1, 28):02d}"
    if key in ("origin", "destination"):
        return rng.choice(("JFK", "SFO", "ORD", "LAX", "SEA", "BOS", "DEN", "ATL"))
    if key == "passenger_name":
        return rng.choice(("Ana Lopez", "Ravi Shah", "Mia Chen", "Tom Berg"))
    return rng.choice(("Y", "B", "M", "H", "Q"))


# -- Magentic-One: the browser, re-delegation, pages seen before ------------------------------
def _web_world(b: PathBuilder, d: float) -> None:
    # The UI noise a screenshot-and-OCR reading adds grows with the difficulty.
    b.world.ui_noise = d


def _address(canonical: str, rng: random.Random, d: float) -> str:
    """An address of the page ``canonical``; the harder, the more unlike its first spelling."""
    host, _, path = canonical.partition("/")
    if rng.random() >= d:
        return f"https://{host}/{path}"
    site = next((s for s in SITES if s.endswith(host)), host)
    tails = ("", "/", f"#{rng.choice(('top', 'main', 'content', 'results'))}",
             f"?utm_source={rng.choice(('newsletter', 'google', 'twitter'))}", f"?ref={rng.choice(('home', 'nav', 'sidebar'))}",
             f"/?utm_medium=email&utm_campaign=q{rng.randint(1, 4)}")
    scheme = rng.choice(("https://", "http://", ""))
    return f"{scheme}{rng.choice((site, host))}/{path}{rng.choice(tails)}"


def _browse(b: PathBuilder, rng: random.Random, steps: int) -> list[str]:
    """A productive walk: a search, then clicks to pages not seen yet; the pages visited."""
    seen: list[str] = []
    for _ in range(100):
        q = render(rng.sample(CONCEPT_NAMES, 2), rng)
        s = ToolCall("web_search", {"query": q})
        if b.gains(s) and b.world._results(",".join(sorted(concepts_of(q)))):
            b.add(s, thought=f"Searching the web for {q!r}.")
            break
    else:
        raise ScriptError("no fresh web search")
    here = b.ws.browser[0]
    links = b.world._results(here[len("search/"):])
    for _ in range(steps):
        options = [t for t, u in links.items() if b.gains(ToolCall("click", {"target": t}))]
        if not options:
            site = rng.choice(SITES)
            fresh = [ToolCall("visit_url", {"url": page_url(site, c)}) for c in rng.sample(CONCEPT_NAMES, 8)]
            fresh = [c for c in fresh if b.gains(c)]
            if not fresh:
                break
            b.add(fresh[0], thought="Opening a page directly.")
        else:
            target = rng.choice(options)
            b.add(ToolCall("click", {"target": target}), thought=f"Clicking {target!r}.")
        here = b.ws.browser[0]
        seen.append(here)
        links = page_links(b.world.seed, here)
    if not seen:
        raise ScriptError("the walk saw no page")
    return seen


@family("web_revisit", looping=True, **SHORT)
def web_revisit(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Magentic-One WebSurfer: clicks and typed addresses that lead back to pages already seen, with UI noise.

    Real class: held-out Magentic-One traces (guard recall 0.44) where the web agent goes
    round in a site — "Home", a link it followed before, the same address typed again with
    another spelling — and every page comes back with a different screenshot reading (OCR
    misreads, a cookie banner, a moving "updated" clock and view counter). ``difficulty``
    sets the UI noise (``World.ui_noise``) and how far an address is respelled (scheme,
    ``www.``, slash, fragment, tracking parameters)."""
    d = level(rng, p)

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        _web_world(b, d)
        b.add_productive(rng.randint(*span(p["prefix"])), tools=("search", "calc"))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        seen = _browse(b, rng, rng.randint(2, 4))
        home = seen[0].split("/", 1)[0] + "/"
        if b.gains(ToolCall("visit_url", {"url": page_url(home.rstrip("/"), "")})):
            b.add(ToolCall("visit_url", {"url": page_url(home.rstrip("/"), "")}), thought="Back to the site's home page.")
            seen.append(home)
        probe = b.fork()
        calls: list[ToolCall] = []
        for _ in range(loop_length(rng, p)):
            here = probe.ws.browser[0]
            back = [t for t, u in page_links(b.world.seed, here).items() if u in seen] if not here.startswith("search/") else []
            if back and rng.random() < 0.5:
                call = ToolCall("click", {"target": rng.choice(back)})
            else:
                call = ToolCall("visit_url", {"url": _address(rng.choice(seen), rng, d)})
            if probe.gains(call):
                continue
            probe.run(call)
            calls.append(call)
        if len(calls) < 3:
            raise ScriptError("too short a walk over seen pages")
        return Stuck(calls, meta={"difficulty": round(d, 3), "pages": len(seen)})

    return build_looping(rng, p, "web_revisit", setup, prefix=prefix)


_ASK = ("Please open {q} and report what it says.", "Go to the page on {q} and summarise it.",
        "Find {q} on the site and tell me.", "Look at {q} again, please.", "Could you check {q}?",
        "Navigate to {q} and read it out.", "I still need {q}; open it.", "Try {q} once more.")


@family("redelegate_same_page", looping=True, **{**SHORT, "personas": ("paraphraser", "stubborn")})
def redelegate_same_page(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Magentic-One: the orchestrator re-delegates a done request in new words; the web agent brings the same page, or no reply comes.

    Real class: held-out Magentic-One re-delegation loops (guard recall 0.44). The
    orchestrator re-instructs WebSurfer in new words; either the reply is the page already
    seen, after another browser action and with other UI noise ("I clicked 'x'. Here is a
    screenshot of ..."; variant ``same_page``), or the reply is missing and the browser
    action that follows lands on the seen page (variant ``no_reply``). ``difficulty`` sets
    the UI noise, how far each re-delegation is reworded, and how far an address is respelled."""
    d = level(rng, p)

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        _web_world(b, d)
        b.add_productive(rng.randint(*span(p["prefix"])), tools=("search", "calc"))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        variant = rng.choice(("same_page", "same_page", "no_reply"))
        for _ in range(200):
            cs = rng.sample(CONCEPT_NAMES, 2)
            q = render(cs, rng, filler=False)
            text = rng.choice(_ASK).format(q=q)
            if request_key(text) != request_key(q):
                continue
            if variant == "same_page":
                ask = ToolCall("WebSurfer", {"instruction": text})
                if b.gains(ask):
                    break
            else:
                ask = ToolCall("delegate", {"agent": "WebSurfer", "instruction": text})
                page = canonical_url(page_url(rng.choice(SITES), sorted(cs)[0]))
                visit = ToolCall("visit_url", {"url": "https://" + page})
                if b.gains(ask) and b.gains(visit):
                    break
        else:
            raise ScriptError("no fresh request to delegate")
        b.add(ask, thought=f"Asking WebSurfer for {q!r}.")
        if variant == "no_reply":
            b.add(visit, thought="WebSurfer opens the page.")
        page = b.ws.browser[0]
        seen_asks = [text]
        calls: list[ToolCall] = []
        n = loop_length(rng, p)
        while len(calls) < n:
            for _ in range(20):
                words = paraphrase(q, rng) if rng.random() < 0.3 + 0.7 * d else q
                text = rng.choice(_ASK).format(q=words)
                if text not in seen_asks[-3:] and request_key(text) == request_key(q):
                    break
            seen_asks.append(text)
            calls.append(ToolCall(ask.tool, {**ask.args, "instruction": text}))
            if variant == "no_reply" or rng.random() < 0.5:  # the browser action the delegation caused
                calls.append(ToolCall("visit_url", {"url": _address(page, rng, d)}))
        return Stuck(calls[:n], meta={"variant": variant, "difficulty": round(d, 3)})

    return build_looping(rng, p, "redelegate_same_page", setup, prefix=prefix)


# -- loops hidden behind result noise, loops after long productive stretches -----------------
@family("noisy_repeat", looping=True, **SHORT)
def noisy_repeat(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The identical call again whose result differs only in noise: a clock, a counter, a banner, OCR misreads.

    Real class: loops in the held-out traces hidden behind small result noise — a page
    reloaded with a new "updated N minutes ago" and view count, a stalled job polled for a
    status that never moves while the request id and timing change. Redundant all the
    same. ``difficulty`` sets the UI noise of pages (``World.ui_noise``)."""
    d = level(rng, p)

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        _web_world(b, d)
        b.add_productive(rng.randint(*span(p["prefix"])))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        variant = rng.choice(("reload", "search", "stalled_job"))
        if variant == "stalled_job":
            job = f"job-{rng.randint(100, 999)}"
            b.world.jobs[job] = 10 ** 6  # never moves past 0 %
            call = ToolCall("check_status", {"job_id": job})
        elif variant == "search":
            for _ in range(100):
                call = ToolCall("web_search", {"query": render(rng.sample(CONCEPT_NAMES, 2), rng)})
                if b.gains(call):
                    break
        else:
            call = ToolCall("visit_url", {"url": page_url(rng.choice(SITES), rng.choice(CONCEPT_NAMES))})
        if not b.gains(call):
            raise ScriptError("nothing fresh to repeat")
        b.add(call, thought="Let me look at that.")
        return Stuck([call] * loop_length(rng, p), meta={"variant": variant, "difficulty": round(d, 3)})

    return build_looping(rng, p, "noisy_repeat", setup, prefix=prefix)


@family("late_loop", looping=True, **{**{k: v for k, v in SHORT.items() if k != "prefix"}, "loop_length": (5, 12),
                                      "tree_share": 0.0})
def late_loop(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A loop that starts only after a long productive stretch, with productive identical repeats in it.

    Real class: held-out loops that start late in long runs (Magentic-One, ReAct): the
    stretch before holds polling and scrolling whose identical calls gained something,
    so a guard that counts repeats over the whole run fires early, and one that forgets
    must still catch the loop when it comes. ``difficulty`` sets the stretch: 20 productive
    calls at 0, 90 at 1."""
    d = level(rng, p)
    stretch = int(20 + 70 * d)

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        made = 0
        while made < stretch:
            r = rng.random()
            if r < 0.15:  # a job polled until it is done: identical calls that gain
                job = f"job-{rng.randint(100, 999)}"
                if job in b.world.jobs:
                    continue
                polls = rng.randint(2, 4)
                b.world.jobs[job] = polls
                for _ in range(polls + 1):
                    b.add(ToolCall("check_status", {"job_id": job}), thought=f"Checking {job}.")
                made += polls + 1
            elif r < 0.25:  # a page scrolled screen by screen
                url = f"https://www.example.org/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 999)}"
                if not b.gains(ToolCall("open_url", {"url": url})):
                    continue
                b.add(ToolCall("open_url", {"url": url}), thought=f"Opening {url}.")
                for _ in range(viewports(b.world.seed, url) - 1):
                    b.add(ToolCall("scroll", {}), thought="Scrolling down.")
                made += viewports(b.world.seed, url)
            else:
                k = rng.randint(1, 3)
                b.add_productive(k)
                made += k

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = b.productive(tools=("search", "read_file", "http_get"))
        b.add(a)
        x = b.productive(tools=("read_file", "list_dir", "calc"))
        b.add(x)
        n = loop_length(rng, p)
        variant = rng.choice(("consecutive", "interleaved"))
        calls = [a] * n if variant == "consecutive" else [a if i % 2 == 0 else x for i in range(n)]
        return Stuck(calls, meta={"variant": variant, "stretch": stretch, "difficulty": round(d, 3)})

    sc = build_looping(rng, p, "late_loop", setup, prefix=prefix)
    sc.horizon = stretch + 60  # room for the whole stretch and the loop
    return sc


# -- harder variants of the SPEC's loop kinds ------------------------------------------------
@family("paraphrase_far", looping=True, **{**SHORT, "personas": ("paraphraser",)})
def paraphrase_far(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same question reworded far from its earlier wordings: other synonyms, order and filler throughout.

    Real class: ReAct and Magentic-One reworded loops whose wordings share few tokens
    (a title re-searched under another name, an instruction rewritten). ``difficulty``
    lowers the token overlap: each rewording is the least similar of 1 (at 0) to 12 (at 1)
    fresh renderings to every earlier wording."""
    d = level(rng, p)
    pool = 1 + int(round(11 * d))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        for _ in range(200):
            cs = rng.sample(CONCEPT_NAMES, rng.choice((2, 3)))
            a = ToolCall("search", {"query": render(cs, rng)})
            if b.gains(a):
                break
        else:
            raise ScriptError("no fresh search")
        b.add(a)
        seen = [a.args["query"]]
        for _ in range(loop_length(rng, p)):
            cands = [render(cs, rng) if rng.random() < d else paraphrase(seen[-1], rng, avoid=seen) for _ in range(pool)]
            cands = [c for c in cands if c.strip().lower() not in {s.strip().lower() for s in seen}] or cands
            seen.append(min(cands, key=lambda c: (max(jaccard(c, s) for s in seen), c)))
        overlap = sum(jaccard(seen[i], seen[i - 1]) for i in range(1, len(seen))) / (len(seen) - 1)
        return Stuck([ToolCall("search", {"query": q}) for q in seen[1:]],
                     meta={"difficulty": round(d, 3), "mean_jaccard": round(overlap, 3)})

    return build_looping(rng, p, "paraphrase_far", setup)


@family("drift_multi", looping=True, **SHORT)
def drift_multi(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Several arguments nudged at once (a date range and a page size; a limit and an offset past the end), nothing new back.

    Real class: drift in the held-out traces rarely moves one number: agents widen a date
    range and a page size together, or step a limit and an offset past the last result.
    ``difficulty`` is how many arguments move per step (1 to 3) and how far."""
    d = level(rng, p)
    moving = 1 + int(round(2 * d))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        n = loop_length(rng, p)
        if rng.random() < 0.5:  # a report API whose range parameters do not change the report
            url = f"https://reports.example.com/v2/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 999)}"
            params = {"from": 1, "to": 28, "page_size": 50}
            b.add(ToolCall("http_get", {"url": url, "params": _dates(params)}), thought="Fetching the report.")
            calls = []
            for i in range(n):
                keys = rng.sample(sorted(params), moving)
                for k in keys:
                    params[k] = params[k] + rng.choice((-1, 1)) * rng.randint(1, 1 + int(6 * d)) if k != "page_size" \
                        else params[k] + 10 * rng.randint(1, 3)
                params["from"] = max(1, min(params["from"], 27))
                params["to"] = max(params["from"] + 1, min(params["to"], 28))
                calls.append(ToolCall("http_get", {"url": url, "params": _dates(params)}))
            return Stuck(calls, meta={"variant": "report_range", "moving": moving, "difficulty": round(d, 3)})
        for _ in range(200):
            q = render(rng.sample(CONCEPT_NAMES, 2), rng)
            total = len(b.world._rank(concepts_of(q)))
            if 1 <= total <= 8 and b.gains(ToolCall("search", {"query": q, "limit": total})):
                break
        else:
            raise ScriptError("no short result list to drift over")
        b.add(ToolCall("search", {"query": q, "limit": total}))
        limit, offset = total, total
        b.add(ToolCall("search", {"query": q, "limit": limit, "offset": offset}))  # the first empty page is news
        calls = []
        words = q
        for i in range(n):
            keys = rng.sample(("limit", "offset", "query"), moving)
            if "limit" in keys:
                limit += rng.randint(1, 1 + int(4 * d))
            if "offset" in keys:
                offset += rng.randint(1, 1 + int(4 * d))
            if "query" in keys:
                words = paraphrase(q, rng, avoid=[words])
            calls.append(ToolCall("search", {"query": words, "limit": limit, "offset": max(offset, total)}))
        return Stuck(calls, meta={"variant": "limit_offset", "moving": moving, "difficulty": round(d, 3)})

    return build_looping(rng, p, "drift_multi", setup)


def _dates(params: dict[str, int]) -> dict[str, Any]:
    return {"from": f"2024-03-{params['from']:02d}", "to": f"2024-03-{params['to']:02d}", "page_size": params["page_size"]}


@family("cycle_reworded", looping=True, **{**SHORT, "loop_length": (9, 24)})
def cycle_reworded(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Cycles of three to six steps whose members come back reworded or respelled on each pass.

    Real class: Magentic-One and ReAct cycles over several steps (search, open, check,
    search again) where no pass repeats the previous one's text exactly. ``difficulty``
    sets the cycle length (3 at 0, 6 at 1) and the chance that a member is reworded."""
    d = level(rng, p)
    k = 3 + int(round(3 * d))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        members = []
        for i in range(k):
            c = b.productive(tools=("search", "read_file", "list_dir") if i % 2 == 0 else ("read_file", "search", "calc"))
            b.add(c)
            members.append(c)
        calls = []
        for i in range(max(loop_length(rng, p), 2 * k)):
            c = members[i % k]
            calls.append(_respelled(c, rng) if rng.random() < d else c)
        return Stuck(calls, meta={"cycle": k, "difficulty": round(d, 3)})

    return build_looping(rng, p, "cycle_reworded", setup)


def _respelled(call: ToolCall, rng: random.Random) -> ToolCall:
    """The same call in other words: a query paraphrased, a path respelled, spacing changed."""
    args = dict(call.args)
    if call.tool == "search":
        args["query"] = paraphrase(args["query"], rng)
    elif call.tool in ("read_file", "list_dir"):
        args["path"] = rng.choice((f"./{args['path']}", args["path"].replace("/", "//"), f"{args['path']} "))
    elif call.tool == "calc":
        args["expression"] = cosmetic_variants(args["expression"], rng, 1)[0].replace(" ", rng.choice(("", "  ")))
    return ToolCall(call.tool, args)


# -- paging: the hard negative, and the loop it becomes past the end ---------------------------
def _pageable(b: PathBuilder, rng: random.Random, least: int) -> tuple[str, int]:
    for _ in range(300):
        q = render(rng.sample(CONCEPT_NAMES, 1), rng)
        total = len(b.world._rank(concepts_of(q)))
        if total >= least and b.gains(ToolCall("search", {"query": q, "limit": 1})):
            return q, total
    raise ScriptError("no query with enough results to page through")


def _page_through(b: PathBuilder, q: str, total: int, size: int) -> int:
    """Pages 1, 2, 3 ... of ``q`` (by number) up to the last one; each brings new results. Returns the next page."""
    page = 1
    while (page - 1) * size < total:
        b.add(ToolCall("search", {"query": q, "limit": size, "page": page}), thought=f"Page {page} of the results.")
        page += 1
    return page


@family("numbered_paging", looping=False, difficulty=DIFFICULTY, queries=(1, 2), **TREE)
def numbered_paging(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Paging through numbered results: the same query, page 2, 3, 4 ..., each page with new items.

    Real class: loop-guard incidents users reported — an agent paging through results is
    stopped though every page brings new items (only the offset changes, the result header
    repeats). ``difficulty`` shrinks the page (3 results at 0, 1 at 1), so there are more
    pages whose calls differ in one number."""
    world, b = start_world(rng)
    d = level(rng, p)
    size = 3 - int(round(2 * d))
    b.add_productive(rng.randint(0, 3))
    pages = 0
    for _ in range(rng.randint(*span(p["queries"]))):
        q, total = _pageable(b, rng, least=size + 2)
        pages += _page_through(b, q, total, size) - 1
        b.add_productive(rng.randint(1, 2))
    return finish(world, b, rng, p, difficulty=round(d, 3), pages=pages, page_size=size)


@family("paging_overrun", looping=True, **{**SHORT, "loop_length": (4, 10)})
def paging_overrun(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Paging through results to the end (each page new), then on past the last page: empty pages.

    Real class: users' loop-guard incidents — guards fire early, on the productive pages
    before the end, and the loop is the empty pages past it. ``difficulty`` shrinks the page
    (3 results at 0, 1 at 1): more productive pages before the overrun."""
    d = level(rng, p)
    size = 3 - int(round(2 * d))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        q, total = _pageable(b, rng, least=size + 2)
        page = _page_through(b, q, total, size)
        b.add(ToolCall("search", {"query": q, "limit": size, "page": page}), thought="One more page.")  # first empty: news
        calls = [ToolCall("search", {"query": q, "limit": size, "page": page + i + 1}) for i in range(loop_length(rng, p))]
        return Stuck(calls, meta={"difficulty": round(d, 3), "page_size": size, "results": total})

    return build_looping(rng, p, "paging_overrun", setup)


# -- edit, then re-run the same test, the edit made through a tool a guard may not read as a write --
@family("edit_retest_mixed", looping=False, difficulty=DIFFICULTY, rounds=(2, 5), **TREE)
def edit_retest_mixed(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Edit, then the identical test run again, the edits made through whichever tool was at hand.

    Real class: held-out multi-tool coding runs where guards fire at the re-run of a test
    right after an edit they did not take for a write. Built only from the world's existing
    tools (the editor-tool persona is the effects work's): ``write_file``, and ``bash``
    edits (``sed -i``, ``cat > f <<EOF``, ``python - <<EOF`` scripts), with the tests run by
    ``run_tests`` or ``pytest`` in ``bash``. ``difficulty`` is the share of edits made
    through ``bash`` rather than ``write_file``, and of rounds re-tested twice in a row
    across two tools (the same state, seen by another test tool: new to that tool)."""
    world, b = start_world(rng)
    d = level(rng, p)
    target = rng.choice(("tests", "tests/"))
    tests = ToolCall("run_tests", {"target": target})
    shell_test = bash(rng.choice(TEST_COMMANDS))
    first = tests if rng.random() < 0.5 else shell_test
    b.add_productive(rng.randint(0, 2), tools=("read_file", "list_dir"))
    b.add(first, thought="Running the tests first.")
    src = sorted(f for f in world.files if f.startswith("src/"))
    rng.shuffle(src)
    through_bash = 0
    rounds = rng.randint(*span(p["rounds"]))
    for r in range(rounds):
        path = src[r % len(src)]
        read = ToolCall("read_file", {"path": path})
        if b.gains(read):
            b.add(read, thought=f"Reading {path}.")
        if rng.random() < d:
            b.add(bash(edit_command(b, path, rng, r)), thought=f"Editing {path}.")
            through_bash += 1
        else:
            b.add(ToolCall("write_file", {"path": path, "content": (current(world, b.ws, path) or "") + f"\n# fix {r}"}),
                  thought=f"Editing {path}.")
        b.add(first, thought="Re-running the same tests after the edit.")
        other = shell_test if first is tests else tests
        if rng.random() < d and b.gains(other):
            b.add(other, thought="And the other way, to be sure.")
    return finish(world, b, rng, p, difficulty=round(d, 3), rounds=rounds, bash_edits=through_bash)
