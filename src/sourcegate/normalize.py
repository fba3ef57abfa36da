"""Text normalisation shared by search, the terminology bridge and the judge."""

from __future__ import annotations

import unicodedata


def fold(s: str) -> str:
    """Lower case without accents: "Procédure" -> "procedure"."""
    if s.isascii():
        return s.lower()
    return "".join(ch for ch in unicodedata.normalize("NFKD", s.lower()) if not unicodedata.combining(ch))
