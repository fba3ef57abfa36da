"""sourcegate: an evidence gate for document Q&A. Answers only when a source supports it."""

__version__ = "0.1.0"
