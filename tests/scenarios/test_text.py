"""The lexicon and text variation: unambiguous surface forms, real variety, and
refinements that read as close to their original as paraphrases do."""
import random
import statistics

from scenarios.lexicon import CONCEPTS, FILLER, concepts_of, segments, surface_forms
from scenarios.text import jaccard, paraphrase, refine, render

NAMES = sorted(CONCEPTS)


def test_every_surface_form_maps_back_to_exactly_its_concept():
    bad = [(form, c, sorted(concepts_of(form))) for form, c in surface_forms() if concepts_of(form) != {c}]
    assert not bad
    forms = [f for f, _ in surface_forms()]
    assert len(forms) == len(set(forms)), "a surface form listed under two concepts"
    # Upper case and surrounding filler do not change the meaning.
    for form, c in surface_forms():
        assert concepts_of(f"please show {form.upper()} figures") == {c}


def test_filler_carries_no_concept():
    assert not [w for w in FILLER if concepts_of(w)]


def test_the_vocabulary_is_large_and_varied():
    assert len(CONCEPTS) >= 70
    assert len(surface_forms()) >= 400
    assert min(len(f) for f in CONCEPTS.values()) >= 5
    # Number formats and period notations are surface forms of one concept each.
    assert concepts_of("FY24") == concepts_of("fiscal 2024") == concepts_of("2024") == {"y2024"}
    assert concepts_of("Q3") == concepts_of("third quarter") == concepts_of("jul-sep") == {"q3"}


def test_render_always_means_exactly_its_concepts():
    rng = random.Random(0)
    for _ in range(3000):
        cs = set(rng.sample(NAMES, rng.choice((1, 2, 3))))
        assert concepts_of(render(cs, rng)) == cs


def test_segments_split_longest_phrase_first():
    assert segments("fiscal year 2024 sales tax") == [("y2024", "fiscal year 2024"), ("tax", "sales tax")]


def test_paraphrases_keep_the_concepts_and_are_not_just_cosmetic():
    rng = random.Random(1)
    for _ in range(500):
        q = render(rng.sample(NAMES, 2), rng)
        p = paraphrase(q, rng)
        assert concepts_of(p) == concepts_of(q)
        assert " ".join(p.lower().split()) != " ".join(q.lower().split())


def test_a_lookup_table_cannot_memorise_the_paraphrases():
    rng = random.Random(2)
    q = "q3 revenue"
    seen = {paraphrase(q, rng).lower() for _ in range(3000)}
    assert len(seen) > 1500


def test_refinements_read_as_close_as_paraphrases_but_mean_something_else():
    rng = random.Random(3)
    para, ref = [], []
    for _ in range(1500):
        q = render(rng.sample(NAMES, rng.choice((2, 3))), rng)
        para.append(jaccard(q, paraphrase(q, rng)))
        rs = refine(q, rng, NAMES, n=2)
        assert all(concepts_of(r) != concepts_of(q) for r in rs)
        if rs:
            ref.append(jaccard(q, rs[0]))
    p, r = statistics.mean(para), statistics.mean(ref)
    # Wording similarity alone cannot tell them apart.
    assert abs(p - r) < 0.08, (p, r)
