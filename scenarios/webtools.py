"""A web agent's browser, as Magentic-One's WebSurfer drives it, with the noise its pages carry.

- ``visit_url(url)``: the address bar. A site serves one page for many spellings of its
  address (scheme, ``www.``, a trailing slash, a ``#fragment``, tracking parameters such
  as ``utm_source`` or ``ref``), so a new spelling of a seen address brings a seen page;
- ``click(target)``: a link of the open page, by its text. Every page links to a few
  others and back to the site's home page, so a walk through links comes back to pages
  already seen;
- ``web_search(query)``: the search engine's result page for the query's concepts
  (a rewording brings the same results);
- ``WebSurfer(instruction)``: the orchestrator's request to its web agent, named as the
  Magentic-One importer names it (the tool is the agent). The agent takes one browser
  action toward the page the instruction asks for (its concepts, on the open site) and
  replies with what it did and that page ("I clicked 'x'. Here is a screenshot of ...").
  A reworded request brings the same page, after another action.

What a page says is its *facts* (which page, which results); what a screenshot-and-OCR
reading of it adds around that is *UI noise*, drawn per call: a "last updated" clock and
a view counter that move on every visit, a cookie banner or a rotating sponsored line
that come and go, and OCR misreadings of a few characters. ``World.ui_noise`` (0..1,
default 0: the clock and counter only) sets how much; a family sets it on its world.
Nothing of the noise is a fact: a page seen before teaches nothing however it is rendered.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

from detectors.protocol import Observation

from .lexicon import CONCEPTS, concepts_of

#: Query parameters that never change what a page shows (tracking, sessions).
TRACKING = ("utm_source", "utm_medium", "utm_campaign", "ref", "fbclid", "gclid", "sessionid", "src")
#: Link texts every page of a site shows besides its own links.
NAV = ("Home", "About us", "Contact")
SITES = ("www.example.org", "docs.example.com", "news.example.net")
_OCR = (("l", "1"), ("O", "0"), ("rn", "m"), ("e", "c"), ("S", "5"), ("i", "í"), ("a", "o"), (".", ","))
_BANNERS = ("We use cookies to improve your experience. [Accept all] [Reject]",
            "Subscribe to our newsletter! [Sign up] [No thanks]",
            "Sign in to save your preferences. [Sign in]",
            "This site uses cookies. By continuing you agree. [OK]")
_NAMES = sorted(CONCEPTS)
_ACTIONS = ("I clicked '{link}'.", "I clicked the control.", "I typed '{words}' into the browser search bar.",
            "I scrolled down one page in the browser.", "I typed '{url}' into the browser address bar.",
            "I clicked the browser back button.")


def _bytes(*parts: Any) -> bytes:
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=32).digest()


def canonical_url(url: Any) -> str:
    """The page an address names: host without ``www.``, path without a trailing slash,
    no fragment, no tracking parameters, the rest of the query sorted."""
    text = str(url).strip()
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    host = parts.netloc.lower()
    host = host[4:] if host.startswith("www.") else host
    query = sorted((k, v) for k, v in parse_qsl(parts.query) if k.lower() not in TRACKING)
    path = parts.path.rstrip("/") or "/"
    return host + path + (f"?{urlencode(query)}" if query else "")


def page_url(site: str, slug: str) -> str:
    """The address of a site's page ``slug`` ("" is the home page), as a link spells it."""
    return f"https://{site}/{slug}"


def page_title(canonical: str) -> str:
    host, _, slug = canonical.partition("/")
    return slug.replace("-", " ").title() or host


def page_links(seed: int, canonical: str, k: int = 4) -> dict[str, str]:
    """Link text -> canonical address of the page it opens, fixed per world and page:
    ``k`` topic pages of the same site (named by a concept, so a walk runs into pages it
    has seen) and the navigation links, which lead back to the site's home page."""
    host = canonical.split("/", 1)[0]
    r = _bytes(seed, "links", canonical)
    links: dict[str, str] = {}
    for i in range(k):
        slug = _NAMES[(r[2 * i] << 8 | r[2 * i + 1]) % len(_NAMES)]
        links[CONCEPTS[slug][0].title()] = f"{host}/{slug}"
    for nav in NAV:
        links[nav] = f"{host}/" if nav == "Home" else f"{host}/{nav.lower().replace(' ', '-')}"
    return links


class WebTools:
    """Handlers mixed into ``World``; they use its ``seed``, ``_page_text`` and ``_rank``,
    and keep the open page in ``WorldState.browser``."""

    #: How much UI noise a rendered page carries (0..1); see the module docstring.
    ui_noise: float = 0.0

    def ui_chrome(self, state, canonical: str, text: str) -> str:
        """``text`` as a screenshot-and-OCR reading of it shows it on this visit."""
        r = _bytes(self.seed, "chrome", state.tick, canonical)
        level = float(self.ui_noise)
        out = text
        if level > 0:  # OCR misreads: more of them, the noisier the page
            for i in range(int(round(level * 4))):
                a, b = _OCR[r[8 + i] % len(_OCR)]
                at = out.find(a, r[12 + i] % max(1, len(out)))
                if at >= 0:
                    out = out[:at] + b + out[at + len(a):]
        lines = [f"Web page: {page_title(canonical)} ({canonical})"]
        if r[0] < 256 * level:
            lines.append(_BANNERS[r[1] % len(_BANNERS)])
        base = _bytes(self.seed, "views", canonical)  # a page's counter only goes up
        lines.append(f"Last updated {1 + r[2] % 59} minutes ago · {1000 + (base[0] << 8 | base[1]) + 3 * state.tick + r[3] % 3:,} views")
        lines.append(out)
        if r[5] < 256 * level:
            lines.append(f"Sponsored: {CONCEPTS[_NAMES[r[6] % len(_NAMES)]][0]} deals, {10 + r[7] % 80}% off today")
        return "\n".join(lines)

    def _web_page(self, state, canonical: str):
        if canonical.split("/", 1)[0] not in {s[4:] if s.startswith("www.") else s for s in SITES}:
            return (Observation(f"Error: could not resolve host {canonical.split('/', 1)[0]}", error=True),
                    frozenset({f"nohost:{canonical.split('/', 1)[0]}"}), state)
        links = ", ".join(f"'{t}'" for t in page_links(self.seed, canonical))
        body = f"{self._page_text('web:' + canonical)}\nLinks: {links}"
        text = self.ui_chrome(state, canonical, body)
        return Observation(text), frozenset({f"web:{canonical}"}), replace(state, browser=(canonical, 0))

    def _t_visit_url(self, state, args: Mapping[str, Any]):
        return self._web_page(state, canonical_url(args["url"]))

    def _t_click(self, state, args: Mapping[str, Any]):
        here = state.browser[0]
        target = str(args.get("target", "")).strip().strip("'\"")
        links = self._results(here[len("search/"):]) if here.startswith("search/") else (
            page_links(self.seed, here) if here else {})
        hit = next((u for t, u in links.items() if t.casefold() == target.casefold()), None)
        if hit is None:
            where = here or "the blank page"
            return (Observation(f"Error: no element '{target}' on {where}", error=True),
                    frozenset({f"noclick:{here}:{target.casefold()}"}), state)
        return self._web_page(state, hit)

    def _results(self, key: str) -> dict[str, str]:
        """A result page's links: result title -> the page it opens (the result's first concept on its site)."""
        ranked = self._rank(frozenset(c for c in key.split(",") if c))[:4]
        return {d.title: canonical_url(page_url(SITES[int(d.id[1:]) % len(SITES)], sorted(d.concepts)[0]))
                for d in ranked}

    def _t_web_search(self, state, args: Mapping[str, Any]):
        query = str(args["query"])
        qc = concepts_of(query)
        key = ",".join(sorted(qc))
        results = self._results(key)
        if not results:
            return Observation(self.ui_chrome(state, f"search/{key}", f"No results for '{query}'.")), \
                frozenset({f"noresults:{key}"}), state
        lines = [f"{len(results)} results for '{query}'"] + [f"{t} — https://{u}" for t, u in results.items()]
        return (Observation(self.ui_chrome(state, f"search/{key}", "\n".join(lines))), frozenset({f"serp:{key}"}),
                replace(state, browser=(f"search/{key}", 0)))

    def _t_WebSurfer(self, state, args: Mapping[str, Any]):  # noqa: N802 — the tool is named after the agent
        instruction = str(args["instruction"])
        cs = sorted(concepts_of(instruction))
        if not cs:
            return (Observation("WebSurfer: I could not tell which page you mean.", error=True),
                    frozenset({"websurfer:unclear"}), state)
        here = state.browser[0]
        host = here.split("/", 1)[0] if here and not here.startswith("search/") else canonical_url(
            page_url(SITES[int(_bytes(self.seed, "site", cs[0])[0]) % len(SITES)], "")).rstrip("/")
        page = f"{host}/{cs[0]}"
        r = _bytes(self.seed, "action", state.tick, instruction)
        links = list(page_links(self.seed, here)) if here and not here.startswith("search/") else list(NAV)
        action = _ACTIONS[r[0] % len(_ACTIONS)].format(link=links[r[1] % len(links)], words=" ".join(cs),
                                                         url=f"https://{page}")
        obs, facts, state = self._web_page(state, page)
        if obs.error:
            return obs, facts, state
        return Observation(f"{action}\n\nHere is a screenshot of [{page_title(page)}](https://{page}).\n{obs.content}"), \
            facts, state
