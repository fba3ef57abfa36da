"""Browse the project's sources to write labelled questions.

    python -m training.people.docs list KEY               documents of a source (not in the held-out split):
                                                         doc_id, language, versions and passages per version
    python -m training.people.docs show DOC_ID|PASSAGE_ID [VERSION]   every passage of a document
    python -m training.people.docs grep REGEX [KEY]       passages whose text or title matches (id and a snippet)
    python -m training.people.docs split DOC_ID           train / cal / test for one document

A question is never written on a `test` document (one in five, by an MD5 of its doc_id).
"""
import collections
import re
import sys

from .common import load_passages, split


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        sys.exit(__doc__)
    cmd, rest = argv[0], argv[1:]
    rows = load_passages()
    if cmd == "list":
        prefix = rest[0] if rest else ""
        docs, lang = collections.defaultdict(collections.Counter), {}
        for r in rows.values():
            if r["doc_id"].startswith(prefix) and split(r["doc_id"]) != "test":
                docs[r["doc_id"]][(r["version"], r["status"])] += 1
                lang[r["doc_id"]] = r["lang"]
        for d in sorted(docs):
            vers = ", ".join(f"{v}{'(archived)' if s == 'archived' else ''}:{n}" for (v, s), n in sorted(docs[d].items()))
            print(f"{d}\t{lang[d]}\t{vers}")
        print(f"{len(docs)} documents", file=sys.stderr)
    elif cmd == "show":
        doc, ver = rest[0], (rest[1] if len(rest) > 1 else None)
        if doc in rows:
            doc = rows[doc]["doc_id"]
        if split(doc) == "test":
            sys.exit(f"{doc} is in the held-out split: do not write questions on it")
        hits = [r for r in rows.values() if r["doc_id"] == doc and (ver is None or r["version"] == ver)]
        if not hits:
            sys.exit(f"{doc}: no such document (`list KEY` lists them; a passage id works too)")
        for r in hits:
            print(f"=== {r['id']}  [version {r['version']}, {r['status']}, {r['lang']}]  {r['title']}")
            print(r["text"])
            print()
    elif cmd == "grep":
        rx = re.compile(rest[0], re.I)
        key = rest[1] if len(rest) > 1 else ""
        for r in rows.values():
            if r["doc_id"].startswith(key) and split(r["doc_id"]) != "test":
                m = rx.search(r["text"]) or rx.search(r["title"])
                if m:
                    src = r["text"] if rx.search(r["text"]) else r["title"]
                    m = rx.search(src)
                    a = max(0, m.start() - 80)
                    print(f"{r['id']}\t[{r['status']}]\t{src[a:m.end() + 80]!r}")
    elif cmd == "split":
        print(split(rest[0]))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
