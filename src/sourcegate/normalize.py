"""Text normalisation shared by search, the terminology bridge and the judge."""

from __future__ import annotations

import unicodedata


def fold(s: str) -> str:
    """Lower case without accents: "Procédure" -> "procedure"."""
    if s.isascii():
        return s.lower()
    return "".join(ch for ch in unicodedata.normalize("NFKD", s.lower()) if not unicodedata.combining(ch))


_CONFUSABLE: dict[int, str] | None = None
_CONFUSABLE_PUNCT: dict[int, str] | None = None


def _confusable_map() -> dict[int, str]:
    """Non-ASCII characters that look like an ASCII letter or digit (Cyrillic "а", Greek "ο",
    fullwidth "Ａ"...), mapped to it: from the Unicode confusables data that the
    confusable-homoglyphs package ships."""
    global _CONFUSABLE, _CONFUSABLE_PUNCT
    if _CONFUSABLE is None:
        import json
        from pathlib import Path

        import confusable_homoglyphs

        data = json.loads((Path(confusable_homoglyphs.__file__).parent / "confusables.json").read_text(encoding="utf-8"))
        table: dict[int, str] = {}
        punct: dict[int, str] = {}
        for ch, entry in data.items():
            if len(ch) != 1 or ch.isascii():
                continue
            glyphs = [g.get("c", "") for g in (entry if isinstance(entry, list) else entry.get("homoglyphs", ()))]
            letter = next((c for c in glyphs if len(c) == 1 and c.isascii() and c.isalnum()), None)
            if letter is not None:
                table[ord(ch)] = letter
                continue
            mark = next((c for c in glyphs if len(c) == 1 and c.isascii() and c.isprintable()
                         and not c.isalnum() and not c.isspace()), None)
            if mark is not None:
                punct[ord(ch)] = mark
        _CONFUSABLE, _CONFUSABLE_PUNCT = table, punct
    return _CONFUSABLE


def _id_look_map() -> dict[int, str]:
    """`_confusable_map` and the punctuation that reads as ASCII punctuation (the minus sign, the
    hyphen and en dash, the modifier letter minus as "-", the division slash as "/", the Armenian
    full stop as ":"): for telling document ids apart, where "PROC−01" reads as "PROC-01"."""
    global _ID_LOOK
    if _ID_LOOK is None:
        _confusable_map()
        _ID_LOOK = {**(_CONFUSABLE_PUNCT or {}), **(_CONFUSABLE or {})}
    return _ID_LOOK


_ID_LOOK: dict[int, str] | None = None


# characters that show as nothing or as a blank although they are letters or marks: Hangul fillers, the
# braille blank, the combining grapheme joiner, variation selectors, Mongolian free variation selectors
INVISIBLE = frozenset([0x3164, 0x115F, 0x1160, 0xFFA0, 0x2800, 0x034F, 0x17B4, 0x17B5, *range(0x180B, 0x1810),
                       *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])


def visible(ch: str) -> bool:
    return unicodedata.category(ch) != "Cf" and ord(ch) not in INVISIBLE


def skeleton(s: str) -> str:
    """`fold(s)` after removing format characters (zero-width spaces and joiners, bidi controls) and
    characters that show as nothing (`INVISIBLE`), and mapping look-alike letters of other scripts to
    the ASCII letter they imitate, so that "Іgnоrе" written in Cyrillic reads as "ignore". For reading
    text, never for showing it."""
    if s.isascii():
        return s.lower()
    s = "".join(ch for ch in s if visible(ch))
    # accents first (NFKD keeps "é" a Latin e), then look-alikes of what is left
    s = fold(s)
    return s.translate(_confusable_map()).lower()


def clean_id(doc_id: str) -> str:
    """A document id as stored and shown: no invisible characters (controls, zero-width, bidi, tag
    characters: see `inert.visible_text`), whitespace runs and newlines as one space."""
    from .inert import visible_text

    return " ".join((visible_text(doc_id) or "").split())


def id_key(doc_id: str) -> str:
    """What a document id looks like to a reader, for collision checks: `clean_id`, compatibility
    forms folded (fullwidth letters, ligatures: NFKC), look-alike letters of other scripts mapped
    to the ASCII letter they imitate (a Cyrillic "Р" is "P") and look-alike punctuation to the ASCII
    mark (a minus sign or a dash is "-", a division slash "/"). Case is kept: "kb-1" and "KB-1"
    read differently."""
    s = unicodedata.normalize("NFKC", clean_id(doc_id))
    return s if s.isascii() else clean_id(s).translate(_id_look_map())


def metadata_text(value: str) -> str:
    """A metadata value (front matter, sidecar, a filter's value) as stored and compared: what a
    reader sees of it (`inert.visible_text`: no control, bidi or zero-width characters), whitespace
    runs as one space. Ingest stores this form and a filter compares this form, so a value written
    with control characters is still selected by the text it shows."""
    from .inert import visible_text

    return " ".join((visible_text(value) or "").split())
