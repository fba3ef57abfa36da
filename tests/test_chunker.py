from sourcegate.ingest.chunker import chunk_document, chunk_spans
from sourcegate.models import Document

PARA = ("The pump must be isolated before work starts. Close the suction valve and the discharge valve. "
        "Release the pressure through the drain. ")


def test_chunks_are_bounded_overlap_and_cover_text():
    text = "\n\n".join(PARA * 3 for _ in range(8))
    spans = chunk_spans(text, 800, 120)
    assert len(spans) > 3
    for a, b in spans:
        assert b - a <= 800
    # Every character is covered, and consecutive chunks overlap by at most 120 chars.
    assert spans[0][0] == 0 and spans[-1][1] == len(text.rstrip())
    for (a1, b1), (a2, b2) in zip(spans, spans[1:]):
        assert a2 <= b1 + 2  # no gap beyond the whitespace between sentences
        assert b1 - a2 <= 120


def test_chunks_cut_at_sentence_boundaries():
    text = "\n\n".join(PARA * 3 for _ in range(8))
    for a, b in chunk_spans(text, 800, 120):
        assert text[b - 1] == "."
        assert text[a].isupper()


def test_deterministic_ids_and_change_detection():
    doc = Document(id="d1", title="t", text="\n\n".join(PARA * 4 for _ in range(5)))
    a = chunk_document(doc)
    b = chunk_document(doc)
    assert [c.id for c in a] == [c.id for c in b]
    assert all(c.id.startswith("d1#") for c in a)
    doc2 = Document(id="d1", title="t", text=doc.text.replace("drain", "vent", 1))
    assert chunk_document(doc2)[0].id != a[0].id


def test_long_unbroken_text_is_split():
    text = "word " * 1000
    spans = chunk_spans(text, 800, 120)
    assert all(b - a <= 800 for a, b in spans)
    assert len(spans) >= 6


def test_pages_and_headings_follow_chunks():
    text = ("Alpha section text. " * 50) + "\n\n" + ("Beta section text. " * 50)
    beta = text.index("Beta")
    doc = Document(id="d", title="t", text=text, pages=[(0, 1), (beta, 2)], headings=[(0, "A"), (beta, "A > B")])
    chunks = chunk_document(doc)
    assert chunks[0].page == 1 and chunks[0].heading == "A"
    assert chunks[-1].page == 2 and chunks[-1].heading == "A > B"


def test_empty_text_has_no_chunks():
    assert chunk_spans("   \n\n  ", 800, 120) == []
