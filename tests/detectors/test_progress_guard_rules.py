"""progress_guard's rules for patterns real traces show (issue 14), each on a small trace."""
import pytest

from detectors.commands import cosmetic_form, writes
from detectors.guard import LoopGuard
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Verdict


def _guard() -> LoopGuard:
    return LoopGuard(semantic=False)


def test_a_write_whose_result_repeats_a_read_record_is_progress():
    g = _guard()
    records = {r: f'{{"reservation_id": "{r}", "origin": "SFO", "status": "confirmed", "cabin": "economy"}}'
               for r in ("AAA111", "BBB222", "CCC333")}
    g.record("get_user_details", {"user_id": "u1"}, '{"reservations": ["AAA111", "BBB222", "CCC333"]}')
    for r, rec in records.items():
        g.record("get_reservation_details", {"reservation_id": r}, rec)
    for r, rec in records.items():  # each cancel answers with the record the agent read before
        assert g.check("cancel_reservation", {"reservation_id": r}).verdict is Verdict.ALLOW
        g.record("cancel_reservation", {"reservation_id": r}, rec)
    assert g.check("transfer_to_human_agents", {"summary": "done"}).verdict is Verdict.ALLOW
    # the same write again is still a repeat
    assert g.check("cancel_reservation", {"reservation_id": "AAA111"}).verdict is Verdict.NUDGE


def test_errors_that_say_something_new_are_not_a_same_error_streak():
    g = _guard()
    g.record("get_user_details", {"user_id": "u1"}, "payment methods: certificate_7504069, certificate_4856383, card_1")
    g.record("book", {"payment": "certificate_7504069"}, "Error: payment method certificate_7504069 not found", error=True)
    g.record("book", {"payment": "certificate_4856383"}, "Error: payment method certificate_4856383 not found", error=True)
    assert g.check("book", {"payment": "card_1"}).verdict is Verdict.ALLOW  # another id failed: not one error
    g2 = _guard()
    for i, hint in enumerate(("Alpha Centauri", "Beta Pictoris", "Gamma Draconis")):
        g2.record("search", {"query": f"star {i}"}, f"Error: no page. Did you mean: {hint}?", error=True)
    assert g2.check("search", {"query": "star 9"}).verdict is Verdict.ALLOW  # each failure suggested something new
    g3 = _guard()  # the same error for other arguments is still a loop
    for i in range(2):
        g3.record("book", {"payment": f"gift_{i}"}, "Error: gift card balance is not enough", error=True)
    assert g3.check("book", {"payment": "gift_9"}).verdict is Verdict.NUDGE


def test_trying_the_listed_items_one_after_another_is_fan_out_not_a_same_error_loop():
    # τ-bench: a profile lists four payment methods; three gift cards in turn are refused alike,
    # the credit card goes through. Each refusal is news about that card (the rubric: "another
    # payment method is another call").
    g = _guard()
    g.record("get_user_details", {"user_id": "u1"},
             '{"payment_methods": {"gift_card_7480005": {"amount": 52}, "gift_card_6276644": {"amount": 33}, '
             '"gift_card_7091239": {"amount": 41}, "credit_card_9879898": {"brand": "visa"}}}')
    write = {"reservation_id": "OBUT9V", "cabin": "business"}
    for card in ("gift_card_7480005", "gift_card_6276644", "gift_card_7091239"):
        assert g.check("update_reservation_flights", {**write, "payment_id": card}).verdict is Verdict.ALLOW, card
        g.record("update_reservation_flights", {**write, "payment_id": card}, "Error: gift card balance is not enough",
                 error=True)
    assert g.check("update_reservation_flights", {**write, "payment_id": "credit_card_9879898"}).verdict is Verdict.ALLOW
    # a card tried before in the streak, or one nobody listed, is no fan-out: the same error again is a loop
    assert g.check("update_reservation_flights", {**write, "payment_id": "gift_card_6276644"}).verdict is not Verdict.ALLOW
    assert g.check("update_reservation_flights", {**write, "payment_id": "gift_card_5555555"}).verdict is Verdict.NUDGE


def test_different_code_with_the_same_output_is_not_a_repeat_but_a_cosmetic_edit_is():
    g = _guard()
    a = "import math\nprint(round(math.pi * 2))"
    b = "x = sum(range(4))\nprint(x + 0)"
    g.record("exec.python", {"code": a}, "exitcode: 0\nCode output: 6")
    assert g.check("exec.python", {"code": b}).verdict is Verdict.ALLOW
    g.record("exec.python", {"code": b}, "exitcode: 0\nCode output: 6")
    assert g.check("exec.python", {"code": "# again\nimport math\n\nprint(round(math.pi * 2))   "}).verdict is Verdict.NUDGE
    # indentation is meaning in code, not formatting
    assert cosmetic_form("  import os\n  print(1)") != cosmetic_form("import os\nprint(1)")


def test_a_call_without_a_recorded_result_counts_and_may_be_asked_again():
    det = ProgressGuard(semantic=False)
    g = LoopGuard(det)
    ask = {"instruction": "Please open the page and read the table"}
    g.record("WebSurfer", ask, "I clicked 'Table'. The table shows 3 rows.")
    assert g.check("WebSurfer", ask).verdict is Verdict.NUDGE  # answered before: a repeat
    g2 = LoopGuard(det)
    other = {"instruction": "Please summarise the page"}
    for _ in range(det.max_retries):  # no reply each time: asking again is a retry
        g2.record("WebSurfer", other, None)
        assert g2.check("WebSurfer", other).verdict is Verdict.ALLOW
    g2.record("WebSurfer", other, None)
    assert g2.check("WebSurfer", other).verdict is Verdict.NUDGE  # the retries are spent
    assert g2.state.step == det.max_retries + 1  # result-less calls are on the path


def test_open_loop_unrecorded_observation_means_ran_without_result():
    det = ProgressGuard(semantic=False)
    from detectors.protocol import UNRECORDED, ToolCall

    s = det.start()
    call = ToolCall("Assistant", {"instruction": "compute the total"})
    for _ in range(det.max_retries + 1):
        s = det.record(s, call, det.check(s, call), UNRECORDED)  # ran, no result recorded
    assert s.step == det.max_retries + 1
    assert det.check(s, call).verdict is Verdict.NUDGE
    # None is a call that never ran (pruned, blocked): it is not on the path.
    s2 = det.start()
    for _ in range(det.max_retries + 2):
        s2 = det.record(s2, call, det.check(s2, call), None)
    assert s2.step == 0 and det.check(s2, call).verdict is Verdict.ALLOW


def test_shell_only_agent_edit_then_retest_is_progress_and_a_bare_rerun_is_not():
    g = _guard()
    g.record("bash", {"command": "python -m pytest tests/test_a.py"}, "1 failed, 3 passed", error=True)
    for edit in ("sed -i 's/x = 1/x = 2/' src/a.py", "cat > src/a.py <<'EOF'\nx = 2\nEOF",
                 "git checkout -- src/a.py", "python - <<'EOF'\nopen('src/a.py', 'w').write('x = 3')\nEOF",
                 "echo 'x = 4' >> src/a.py"):
        assert writes(edit), edit
        g.record("bash", {"command": edit}, "")
        assert g.check("bash", {"command": "python -m pytest tests/test_a.py"}).verdict is Verdict.ALLOW, edit
        g.record("bash", {"command": "python -m pytest tests/test_a.py"}, "1 failed, 3 passed", error=True)
    g.record("bash", {"command": "grep -n x src/a.py"}, "1:x = 4")  # a read changes nothing
    assert not writes("grep -n x src/a.py") and not writes("python -c 'print(a > 95)'")
    assert g.check("bash", {"command": "python -m pytest tests/test_a.py"}).verdict is Verdict.NUDGE


def test_paging_the_same_call_is_fine_while_it_shows_new_text():
    g = _guard()
    for part in ("intro text about alpha", "second part on beta", "third part on gamma"):
        assert g.check("scroll", {"direction": "down"}).verdict is Verdict.ALLOW
        g.record("scroll", {"direction": "down"}, f"viewport: {part}")
    g.record("scroll", {"direction": "down"}, "viewport: third part on gamma")  # the bottom: nothing moves
    assert g.check("scroll", {"direction": "down"}).verdict is Verdict.NUDGE


def test_not_found_results_are_news_only_through_new_listed_items():
    g = _guard()
    for i, similar in enumerate((["Apollo 11", "Apollo 12"], ["Apollo 13", "Gemini 3"], ["Skylab", "Mir"])):
        g.record("search", {"query": f"moon mission {i}"}, f"Could not find [moon mission {i}]. Similar: {similar!r}")
    assert g.check("search", {"query": "moon mission 9"}).verdict is Verdict.ALLOW
    g2 = _guard()
    for kw in ("alpha", "beta", "gamma"):
        g2.record("lookup", {"keyword": kw}, "No Results")
    assert g2.check("lookup", {"keyword": "delta"}).verdict is Verdict.NUDGE  # three empty answers in a row


def test_the_same_news_reported_twice_in_a_row_is_counted_once():
    g = _guard()
    page = "Here is a screenshot of [Museum](https://museum.org/). The viewport shows opening hours 9 to 5."
    for target in ("Visit", "Hours", "Tickets"):
        g.record("WebSurfer", {"instruction": f"open {target}"}, f"I clicked '{target}'.\n\n{page} {target} section")
        g.record("click", {"target": target}, f"{page} {target} section")  # what the reply already said
    assert g.check("visit_url", {"url": "https://museum.org/shop"}).verdict is Verdict.ALLOW


# -- rules from the synthetic families modelled on real traces (issue 14, second pass) --------
def test_setting_a_value_back_after_changing_it_is_not_a_repeat_but_a_third_time_is():
    g = _guard()
    rec = '{"id": "R1", "seats": %d, "status": "active"}'
    g.record("get_record", {"record_id": "R1"}, rec % 1)
    g.record("update_record", {"record_id": "R1", "field": "seats", "value": 1}, rec % 1)
    g.record("update_record", {"record_id": "R1", "field": "seats", "value": 2}, rec % 2)
    # the user changed their mind: back to 1 (the write's answer repeats the first read)
    assert g.check("update_record", {"record_id": "R1", "field": "seats", "value": 1}).verdict is Verdict.ALLOW
    g.record("update_record", {"record_id": "R1", "field": "seats", "value": 1}, rec % 1)
    g.record("update_record", {"record_id": "R1", "field": "seats", "value": 2}, rec % 2)
    # flip-flopping: the same write a third time is a loop
    assert g.check("update_record", {"record_id": "R1", "field": "seats", "value": 1}).verdict is Verdict.NUDGE
    g2 = _guard()  # without the value set otherwise in between, the same write again is a repeat
    g2.record("update_record", {"record_id": "R1", "field": "seats", "value": 1}, rec % 1)
    g2.record("update_record", {"record_id": "R2", "field": "seats", "value": 3}, rec % 3)
    assert g2.check("update_record", {"record_id": "R1", "field": "seats", "value": 1}).verdict is Verdict.NUDGE


def test_a_write_with_other_numbers_after_a_write_echoing_a_read_is_no_drift():
    g = _guard()
    rec = '{"id": "R1", "bags": %d, "cabin": "basic"}'
    g.record("get_record", {"record_id": "R1"}, rec % 2)
    g.record("update_record", {"record_id": "R1", "field": "bags", "value": 0}, rec % 0)
    g.record("get_record", {"record_id": "R1"}, rec % 0)  # nothing new in a write's answer...
    # ...yet the write changed the world: another value for it is not parameter drift
    assert g.check("update_record", {"record_id": "R1", "field": "bags", "value": 2}).verdict is Verdict.ALLOW


def test_other_code_printing_the_same_output_many_times_is_a_cross_check_not_a_loop():
    g = _guard()
    out = "exitcode: 0 (execution succeeded)\nCode output: 1209"
    for code in ("print(39 * 31)", "print(31 * 39)", "x = 31\nprint(x * 39)", "print(2418 / 2)", "print(1209)"):
        assert g.check("run_code", {"code": code}).verdict is Verdict.ALLOW, code
        g.record("run_code", {"code": code}, out)
    assert g.check("run_code", {"code": "print(1209 * 1)"}).verdict is Verdict.ALLOW
    assert g.check("run_code", {"code": "print(39 * 31)"}).verdict is Verdict.NUDGE  # the same code again is
    g2 = _guard()  # reads that keep telling nothing new are still no progress
    g2.record("read_file", {"path": "a.md"}, "alpha beta gamma")
    for p in ("b.md", "c.md", "d.md"):
        g2.record("read_file", {"path": p}, "alpha beta gamma")
    assert g2.check("read_file", {"path": "e.md"}).verdict is Verdict.NUDGE


def test_one_edit_tried_with_other_numbers_while_the_test_result_stays_the_same_is_a_loop():
    g = _guard()
    test = {"command": "pytest -q tests"}
    fail = "FAILED tests::test_0\n1 failed, 3 passed (took %d ms)"
    g.record("bash", test, fail % 104, error=True)
    g.record("bash", {"command": "sed -i 's/value=52624x/value=6/' src/a.py"}, "")
    assert g.check("bash", test).verdict is Verdict.ALLOW  # a re-test after an edit
    g.record("bash", test, fail % 50, error=True)  # the same failure (durations are masked)
    g.record("bash", {"command": "sed -i 's/value=40335x/value=9/' src/a.py"}, "")
    # the same failure twice across edits that differ only in their numbers: blind trial
    d = g.check("bash", test)
    assert d.verdict is Verdict.NUDGE and "numbers" in d.message
    g3 = _guard()  # one numeric edit that changes the result is progress
    g3.record("bash", test, fail % 1, error=True)
    g3.record("bash", {"command": "sed -i 's/value=1/value=6/' src/a.py"}, "")
    g3.record("bash", test, "FAILED tests::test_1\n1 failed, 3 passed", error=True)
    g3.record("bash", {"command": "sed -i 's/value=2/value=7/' src/a.py"}, "")
    assert g3.check("bash", test).verdict is Verdict.ALLOW
    g2 = _guard()  # different edits with the same failure stay allowed (the existing shell test too)
    g2.record("bash", test, fail % 1, error=True)
    for edit in ("sed -i 's/x = 1/x = 2/' src/a.py", "echo 'y = 3' >> src/b.py", "sed -i 's/z/w/' src/c.py"):
        g2.record("bash", {"command": edit}, "")
        assert g2.check("bash", test).verdict is Verdict.ALLOW, edit
        g2.record("bash", test, fail % 2, error=True)


def test_asking_a_target_that_answered_before_again_in_new_words_after_silence_is_a_loop():
    g = _guard()
    g.record("delegate", {"agent": "Coder", "instruction": "Please find the deliveries policy and report back."},
             "Coder: done. user base 301; third-quarter 1438.")
    for text in ("Try once more to find regulation on shipments.", "Can you check the terms of delivery?"):
        assert g.check("delegate", {"agent": "Coder", "instruction": text}).verdict is Verdict.ALLOW
        g.record("delegate", {"agent": "Coder", "instruction": text}, "")  # no reply
    d = g.check("delegate", {"agent": "Coder", "instruction": "Look up delivery rules and tell me what you see."})
    assert d.verdict is Verdict.NUDGE and "no reply" in d.message
    # another agent, or a reply in between, starts afresh
    assert g.check("delegate", {"agent": "Writer", "instruction": "Summarise the rules on deliveries."}).verdict is Verdict.ALLOW
    g3 = _guard()
    g3.record("delegate", {"agent": "Coder", "instruction": "Please find the deliveries policy."}, "Coder: done. rules 4.")
    g3.record("delegate", {"agent": "Coder", "instruction": "Try once more to find shipping rules."}, "")
    g3.record("delegate", {"agent": "Coder", "instruction": "Report the refund figures please."}, "Coder: done. refunds 12.")
    g3.record("delegate", {"agent": "Coder", "instruction": "Now the churn figures please."}, "")
    assert g3.check("delegate", {"agent": "Coder", "instruction": "And the latency numbers?"}).verdict is Verdict.ALLOW
    g2 = _guard()  # a target that never answered is not judged by this rule
    for text in ("Please find the deliveries policy.", "Try once more to find shipping rules."):
        g2.record("delegate", {"agent": "Coder", "instruction": text}, "")
    assert g2.check("delegate", {"agent": "Coder", "instruction": "Can you check the delivery terms?"}).verdict is Verdict.ALLOW


# -- rules for misses on real traces (issue 14, recall pass) ------------------------------------
def test_a_longer_phrase_around_one_a_literal_find_did_not_find_is_a_loop():
    g = _guard()
    g.record("search", {"query": "Lake Baikal"}, "Lake Baikal is a rift lake in Siberia, the deepest lake on Earth.")
    g.record("lookup", {"keyword": "seal"}, "No Results")
    # "seal" is not on the page, so no phrase around it can be: rewording does not help
    d = g.check("lookup", {"keyword": "Baikal freshwater seal"})
    assert d.verdict is Verdict.NUDGE and "'seal'" in d.message
    assert g.check("lookup", {"keyword": "seal"}).verdict is Verdict.NUDGE  # the very same phrase too
    # another phrase, or one that only shares part of a word, may still be there
    assert g.check("lookup", {"keyword": "depth"}).verdict is Verdict.ALLOW
    assert g.check("lookup", {"keyword": "sealing"}).verdict is Verdict.ALLOW
    # a search for the phrase (not a literal find) may hit another page: not this rule
    assert g.check("search", {"query": "Baikal seal"}).verdict is Verdict.ALLOW
    g.record("search", {"query": "Baikal seal"}, "The Baikal seal is a species of earless seal endemic to Lake Baikal.")
    # another tool ran: the text being searched may have changed
    assert g.check("lookup", {"keyword": "freshwater seal"}).verdict is Verdict.ALLOW
    g2 = LoopGuard(ProgressGuard(semantic=False, tool_overrides={"find": {"literal_find": True}}))
    g2.record("find", {"text": "exit code"}, "No matches")
    assert g2.check("find", {"text": "nonzero exit code"}).verdict is Verdict.NUDGE  # named by an override
    g3 = _guard()  # without the override, a tool that is not a literal find is left alone
    g3.record("find", {"text": "exit code"}, "No matches")
    assert g3.check("find", {"text": "nonzero exit code"}).verdict is Verdict.ALLOW


def test_no_reply_to_a_near_verbatim_repeat_of_an_answered_request_is_enough_silence():
    from detectors.embedding_model import Embedder, HashingEncoder
    from detectors.protocol import allow

    def guard() -> LoopGuard:  # bag-of-words vectors: shared words make texts similar
        return LoopGuard(ProgressGuard(embedder=Embedder(encode=HashingEncoder(), model_name="fake-bow")))

    ask = {"instruction": "Please look up the bus timetable from Leeds to York for Sunday"}
    again = {"instruction": "Look up the bus timetable from Leeds to York for Sunday"}
    other = {"instruction": "Find the train fares between Leeds and York"}
    reply = "I opened the timetable page. Buses leave Leeds at 9:10 and 11:40 on Sundays."
    g = guard()
    g.record("WebSurfer", ask, reply)
    assert g.check("WebSurfer", again).verdict is Verdict.ALLOW  # asking again may be fine...
    g.record("WebSurfer", again, None)  # ...but the same request, already answered, got no reply
    d = g.check("WebSurfer", other)
    assert d.verdict is Verdict.NUDGE and "word-for-word" in d.message
    assert g.check("Coder", other).verdict is Verdict.ALLOW  # another target is not concerned
    # the harness let it run anyway, and a reply came: that clears it
    g.record("WebSurfer", other, "Train fares from Leeds to York start at 9 pounds.", decision=allow(0))
    assert g.check("WebSurfer", {"instruction": "Which platform does the York train use?"}).verdict is Verdict.ALLOW
    g2 = guard()  # a follow-up in other words that got no reply is one silence, not enough alone
    g2.record("WebSurfer", ask, reply)
    g2.record("WebSurfer", {"instruction": "Confirm whether the 11:40 service stops at Tadcaster"}, None)
    assert g2.check("WebSurfer", other).verdict is Verdict.ALLOW
    g3 = guard()  # an empty reply counts as no reply
    g3.record("WebSurfer", ask, reply)
    g3.record("WebSurfer", again, "")
    assert g3.check("WebSurfer", other).verdict is Verdict.NUDGE


def test_an_alarm_names_the_call_as_it_came_whatever_call_was_prepared_first():
    """The message's ``tool(arguments)`` is made once per distinct call: a repeat with its keys
    in another order, or a list where the first had a tuple, reads the same, and arguments that
    are not a mapping are named as given, not as the mapping the guard wraps them in."""
    from detectors.protocol import Observation, ToolCall
    from detectors.signature import args_text

    g = ProgressGuard(semantic=False)
    s = g.start()
    first = ToolCall("search", {"query": "q3 revenue", "filters": ("2024", "eu")})
    s = g.record(s, first, g.check(s, first), Observation("[D1] Revenue Q3"))
    again = ToolCall("search", {"filters": ["2024", "eu"], "query": "q3 revenue"})
    d = g.check(s, again)
    assert d.alarm and f"search({args_text(again.args)})" in d.message
    assert "filters=[\"2024\",\"eu\"], query=\"q3 revenue\"" in d.message

    s = g.start()
    bare = ToolCall("ping", "host-1")
    s = g.record(s, bare, g.check(s, bare), Observation("pong from host-1"))
    d = g.check(s, ToolCall("ping", "host-1"))
    assert d.alarm and 'ping("host-1")' in d.message and "_=" not in d.message


def test_a_retry_after_a_transient_error_passes_for_any_tool_and_not_forever():
    # ("timed out" and "connection reset" are transient too, for a tool of any name)
    for error in ("Error: request timed out", "Error: connection reset by peer", "503 Service Unavailable"):
        g = _guard()
        args = {"reservation_id": "ZFA04Y"}
        g.record("get_reservation_details", args, error, error=True)
        assert g.check("get_reservation_details", args).verdict is Verdict.ALLOW, error
    g = _guard()
    for _ in range(3):
        g.record("get_order", {"id": 1}, "Error: request timed out", error=True)
    assert g.check("get_order", {"id": 1}).verdict is Verdict.ALLOW  # within max_retries (3)
    g.record("get_order", {"id": 1}, "Error: request timed out", error=True)
    assert g.check("get_order", {"id": 1}).verdict is Verdict.NUDGE  # the fourth retry
    g2 = _guard()  # a permanent error is no reason to ask again
    g2.record("get_order", {"id": 1}, "Error: order not found", error=True)
    assert g2.check("get_order", {"id": 1}).verdict is Verdict.NUDGE
    g3 = _guard()  # nor is a status-like number the call itself carried
    g3.record("get_order", {"id": 503}, "Error: order 503 not found", error=True)
    assert g3.check("get_order", {"id": 503}).verdict is Verdict.NUDGE
    g3.record("get_order", {"id": 7}, "Error: 503 Service Unavailable", error=True)
    assert g3.check("get_order", {"id": 7}).verdict is Verdict.ALLOW


def test_an_error_that_asks_for_a_corrected_call_is_not_transient():
    """SWE-agent's editor refuses an edit that breaks the syntax with "fix your edit command and
    try again": the same edit again is a repeat, not a retry of a call that may pass later."""
    refused = ("Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry "
               "your edit command.\nERRORS:\n- E999 SyntaxError: unmatched ')'\nYour changes have NOT been "
               "applied. Please fix your edit command and try again.")
    g = _guard()
    g.record("edit", {"command": "287:295\n    ]\n    )"}, refused, error=True)
    assert g.check("edit", {"command": "287:295\n    ]\n    )"}).verdict is Verdict.NUDGE
    for later in ("Rate limit reached. Please try again in 20s.", "Busy: retry after 3 seconds",
                  "Server overloaded, try again later"):
        g = _guard()
        g.record("search", {"q": "x"}, later, error=True)
        assert g.check("search", {"q": "x"}).verdict is Verdict.ALLOW, later


def test_a_value_in_quotes_is_the_same_value():
    g = _guard()
    g.record("search_direct_flight", {"origin": "JFK", "destination": "LAX", "date": "2024-05-20"}, "[]")
    for quoted in ('"JFK"', "'JFK'", " `JFK` "):
        assert g.check("search_direct_flight", {"origin": quoted, "destination": "LAX", "date": "2024-05-20"}).verdict \
            is Verdict.NUDGE, quoted
    # quotes inside a value are its text, and an unmatched quote is kept
    assert g.check("search_direct_flight", {"origin": "'JFK", "destination": "LAX", "date": "2024-05-20"}).verdict \
        is Verdict.ALLOW


def test_nudge_after_keeps_the_first_findings_silent_and_counts_them_as_strikes():
    """Cline's warn at 3, stop at 5: ``nudge_after=2, stop_after=4``. Each repeat of a read that
    gives the same answer is a finding; the first two pass with the score of a finding, the next
    two nudge, the fifth stops — after two warnings, not four."""
    from detectors.protocol import Observation, ToolCall

    def play(**params):
        g = ProgressGuard(semantic=False, **params)
        s, out = g.start(), []
        for _ in range(6):
            c = ToolCall("read_file", {"path": "notes.txt"})
            d = g.check(s, c)
            out.append(d)
            s = g.record(s, c, d, Observation("the same notes"))
        return out

    ds = play(nudge_after=2, stop_after=4)
    assert [d.verdict for d in ds] == [Verdict.ALLOW] * 3 + [Verdict.NUDGE] * 2 + [Verdict.STOP]
    assert [d.score for d in ds[1:]] == [1.0, 2.0, 3.0, 4.0, 5.0]  # every finding scored, voiced or not
    assert ds[1].events[0][1]["tier"] == "silent" and ds[1].message is None  # nothing said to the agent
    assert "after 2 warning(s)" in ds[5].message
    # the default voices every finding: nudge, then stop — the same scores
    base = play()
    assert [d.verdict for d in base[:3]] == [Verdict.ALLOW, Verdict.NUDGE, Verdict.STOP]
    assert [d.score for d in base[1:3]] == [1.0, 2.0]
    # per tool: quiet on read_file only
    quiet = play(stop_after=4, tool_overrides={"read_file": {"nudge_after": 1}})
    assert [d.verdict for d in quiet[1:4]] == [Verdict.ALLOW, Verdict.NUDGE, Verdict.NUDGE]
    g = ProgressGuard(semantic=False, tool_overrides={"read_file": {"nudge_after": 3}})
    assert g.nudge_threshold("read_file", 0) == 4.0 and g.nudge_threshold("search", 2) == 3.0


def test_a_refused_edit_is_no_trial_of_values():
    """Blind trial of values needs edits that went through: an editor ``insert`` refused at line 9
    and then made at line 7 is one edit, so the re-test after it is a re-test (a public OpenHands
    run, spotbugs-3557, fired here); two made edits that differ only in their numbers still count."""
    g = _guard()
    test = {"command": "javac T.java && java T"}
    out = "Exception in thread main: expected 3 got 2"
    ins = {"command": "insert", "path": "/testbed/T.java", "new_str": "        sb.append(x);"}
    g.record("execute_bash", test, out, error=True)
    g.record("str_replace_editor", {"command": "str_replace", "path": "/testbed/T.java", "old_str": "a", "new_str": "b"},
             "The file /testbed/T.java has been edited.")
    g.record("execute_bash", test, out, error=True)
    g.record("str_replace_editor", {**ins, "insert_line": 9}, "ERROR: invalid insert_line 9", error=True)
    g.record("str_replace_editor", {**ins, "insert_line": 7}, "The file /testbed/T.java has been edited.")
    assert g.check("execute_bash", test).verdict is Verdict.ALLOW
    g.record("execute_bash", test, out, error=True)
    g.record("str_replace_editor", {**ins, "insert_line": 5}, "The file /testbed/T.java has been edited.")
    d = g.check("execute_bash", test)  # lines 7 and 5: the same edit tried with other numbers, same result
    assert d.verdict is Verdict.NUDGE and "numbers" in d.message



@pytest.mark.parametrize("command, rewrites", [
    ("./gradlew :spotbugs:spotlessApply", True), ("mvn spotless:apply", True), ("black src/", True),
    ("python -m black .", True), ("poetry run black x.py", True), ("cd src && isort .", True),
    ("ruff check --fix .", True), ("ruff format .", True), ("uvx ruff format", True), ("npx prettier --write src", True),
    ("gofmt -w main.go", True), ("cargo fmt", True), ("clang-format -i a.c", True), ("npm run format", True),
    ("make fmt", True),
    # checks that only report, and commands that merely name a formatter
    ("black --check src/", False), ("ruff check .", False), ("ruff format --check .", False),
    ("prettier --check src", False), ("gofmt -l .", False), ("cargo fmt -- --check", False), ("npm run test", False),
    ("python -m pytest tests/test_black.py", False), ("grep -rn black .", False), ("cat isort.cfg", False),
    ("echo black", False), ("./gradlew build", False),
])
def test_a_formatter_run_through_the_shell_is_a_write(command, rewrites):
    """A formatter or fixer rewrites the files it is given, so the build re-run after it is a
    re-test (a public OpenHands run re-ran ``./gradlew build`` after ``spotlessApply`` and passed)."""
    assert writes(command) is rewrites
