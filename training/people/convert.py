"""Markup converters and the chunker that turn a documentation file into passages.

The same rules as the real corpus (`passages.jsonl` of the project's shared real-document data):
markup stripped, words never changed, passages of 300-1500 characters cut only at paragraph,
list-item, line or sentence boundaries, chunks that are more than half code dropped. Each converter
returns blocks `(kind, text)`: "h" a heading, "p" a paragraph or list item, "v" verbatim lines.
Standard library and the `git` command only.
"""
import fnmatch
import html
import os
import re
import subprocess
import textwrap

MIN_LEN = 300
MAX_LEN = 1500
MAX_PASSAGES_PER_DOC = 40  # keeps a source spread over many documents

def find_git_dir(snapshots, repo):
    base = os.path.join(snapshots, repo.replace("/", "+"))
    for cand in (os.path.join(base, "repo"), os.path.join(base, ".git"), base):
        if os.path.isdir(cand) and os.path.exists(os.path.join(cand, "HEAD")):
            return cand
    return None


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir=" + gitdir] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout


def list_files(gitdir, commit):
    out = git(gitdir, "ls-tree", "-r", "-z", "--name-only", commit)
    return [p for p in out.decode("utf-8", "replace").split("\0") if p]


def read_file(gitdir, commit, path):
    return git(gitdir, "show", "%s:%s" % (commit, path)).decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def matches(path, patterns):
    return any(fnmatch.fnmatch(path, p) for p in patterns)


# ---------------------------------------------------------------------------
# Converters: each returns a list of blocks (kind, text) where kind is
# "h" (heading), "p" (paragraph or list item) or "v" (verbatim lines).
# ---------------------------------------------------------------------------
ENTITIES = {"nbsp": " ", "zwsp": "", "sect": "§", "bull": "•", "commit_baseurl": ""}


def unescape_entities(s, extra=None):
    def rep(m):
        name = m.group(1)
        if extra and name in extra:
            return extra[name]
        if name in ENTITIES:
            return ENTITIES[name]
        u = html.unescape("&%s;" % name)
        return u if u != "&%s;" % name else ""
    return re.sub(r"&([A-Za-z][A-Za-z0-9._-]*);", rep, s)


def squash(s):
    return re.sub(r"[ \t\r\n\u00a0]+", " ", s).strip()


DB_VERBATIM = ("programlisting", "screen", "synopsis", "literallayout", "cmdsynopsis")
DB_BLOCK = ("para", "simpara", "term", "listitem", "entry", "row", "title", "refpurpose",
            "member", "glossdef", "formalpara", "note", "warning", "tip",
            "caution", "important", "blockquote", "step", "refnamediv")
DB_SECTION = ("chapter", "sect1", "sect2", "sect3", "sect4", "refsect1", "refsect2",
              "refsect3", "refentry", "appendix", "part", "section", "simplesect", "partintro")


def docbook_labels(text):
    """id -> label map for xref, from xreflabel attributes and titles."""
    labels = {}
    for m in re.finditer(r'<(\w+)[^>]*\bid="([^"]+)"[^>]*\bxreflabel="([^"]+)"', text):
        labels[m.group(2)] = m.group(3)
    for m in re.finditer(r'<(\w+)[^>]*\bid="([^"]+)"[^>]*>\s*(?:<[^>]+>\s*)*?<(?:title|refentrytitle)\b[^>]*>(.*?)</(?:title|refentrytitle)>',
                         text, re.S):
        labels.setdefault(m.group(2), squash(re.sub(r"<[^>]+>", "", m.group(3))))
    for m in re.finditer(r'<varlistentry[^>]*\bid="([^"]+)"[^>]*>\s*<term>(.*?)</term>', text, re.S):
        labels.setdefault(m.group(1), squash(re.sub(r"<[^>]+>", "", re.sub(r"<indexterm.*?</indexterm>", "", m.group(2), flags=re.S))))
    for m in re.finditer(r'<refentry[^>]*\bid="([^"]+)"[^>]*>.*?<refentrytitle\b[^>]*>(.*?)</refentrytitle>', text, re.S):
        labels.setdefault(m.group(1), squash(re.sub(r"<[^>]+>", "", m.group(2))))
    return labels


def convert_docbook(text, labels=None, entities=None):
    labels = labels or {}
    t = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    t = re.sub(r"<\?.*?\?>", "", t, flags=re.S)
    t = re.sub(r"<!DOCTYPE.*?\]>", "", t, flags=re.S)
    t = re.sub(r"<!DOCTYPE[^>]*>", "", t)
    t = re.sub(r"<!ENTITY[^>]*>", "", t)
    t = re.sub(r"<(indexterm|remark|manvolnum|refmiscinfo|refname|refsynopsisdivinfo|comment)\b.*?</\1>", "", t, flags=re.S)
    t = re.sub(r"<indexterm\b[^>]*/>", "", t)

    def xref(m):
        lk = re.search(r'linkend="([^"]+)"', m.group(0))
        if not lk:
            return ""
        lab = labels.get(lk.group(1), lk.group(1))
        return lab
    t = re.sub(r"<xref\b[^>]*/>", xref, t)
    t = re.sub(r'<ulink\s+url="([^"]*)"\s*/>', r"\1", t)
    t = re.sub(r'<ulink\s+url="([^"]*)"\s*>\s*</ulink>', r"\1", t)

    verb = []

    def keep_verbatim(m):
        body = re.sub(r"<[^>]+>", "", m.group(2))
        body = unescape_entities(body, entities).strip("\n")
        verb.append(body)
        return "\n\u0001V%d\u0001\n" % (len(verb) - 1)
    t = re.sub(r"<(%s)\b[^>]*>(.*?)</\1>" % "|".join(DB_VERBATIM), keep_verbatim, t, flags=re.S)

    # headings
    def heading(m):
        return "\n\u0001H%s\u0001\n" % squash(re.sub(r"<[^>]+>", "", m.group(2)))
    t = re.sub(r"<(title|refentrytitle)\b[^>]*>(.*?)</\1>", heading, t, flags=re.S)
    # table rows: cells joined with " | "
    t = re.sub(r"</entry>\s*<entry\b[^>]*>", " | ", t)
    t = re.sub(r"</term>\s*<listitem\b[^>]*>", "</term>\n\u0002", t)
    t = re.sub(r"<listitem\b[^>]*>\s*(<para\b[^>]*>)?", "\n\u0002- ", t)
    t = re.sub(r"<step\b[^>]*>\s*(<para\b[^>]*>)?", "\n\u0002- ", t)
    t = re.sub(r"</?(%s)\b[^>]*>" % "|".join(DB_BLOCK + DB_SECTION), "\n\u0002", t)
    t = re.sub(r"</?(variablelist|itemizedlist|orderedlist|varlistentry|tgroup|thead|tbody|table|informaltable|procedure|simplelist|glosslist|glossentry|refsection|refnamediv|refname|sidebar|figure|mediaobject|imageobject|textobject|example)\b[^>]*>", "\n\u0002", t)
    t = re.sub(r"<refname>.*?</refname>", "", t, flags=re.S)
    t = re.sub(r"<[^>]+>", "", t)
    t = unescape_entities(t, entities)

    blocks = []
    for piece in re.split(r"\n\u0002|\n(?=\u0001)|(?<=\u0001)\n", t):
        piece = piece.strip()
        if not piece:
            continue
        m = re.fullmatch(r"\u0001V(\d+)\u0001", piece)
        if m:
            if verb[int(m.group(1))].strip():
                blocks.append(("v", verb[int(m.group(1))]))
            continue
        m = re.fullmatch(r"\u0001H(.*)\u0001", piece, re.S)
        if m:
            if m.group(1).strip():
                blocks.append(("h", m.group(1).strip()))
            continue
        for sub in re.split(r"(\u0001V\d+\u0001|\u0001H.*?\u0001)", piece):
            sub = sub.strip()
            if not sub:
                continue
            m = re.fullmatch(r"\u0001V(\d+)\u0001", sub)
            if m:
                blocks.append(("v", verb[int(m.group(1))]))
                continue
            m = re.fullmatch(r"\u0001H(.*)\u0001", sub, re.S)
            if m:
                blocks.append(("h", m.group(1).strip()))
                continue
            s = squash(sub)
            if s and s != "-":
                blocks.append(("p", s))
    return blocks


RST_ADMON = ("note", "warning", "caution", "important", "tip", "attention", "danger",
             "seealso", "hint", "error", "admonition", "only", "glossary", "topic",
             "versionadded", "versionchanged", "deprecated", "rubric", "list-table", "table",
             "container", "sidebar", "centered", "hlist",
             "tabs", "tab", "group-tab", "highlights")  # sphinx-tabs (OPNsense option tables sit in tabs)
RST_NOTE = ("note", "warning", "caution", "important", "tip", "attention", "danger", "hint", "error")
RST_CODE = ("code-block", "code", "sourcecode", "parsed-literal", "highlight-block", "prompt")
RST_PYDOM = ("class", "method", "function", "data", "attribute", "classmethod", "staticmethod",
             "decorator", "exception", "py:class", "py:method", "py:function", "py:data", "py:attribute")


def rst_inline(s):
    s = re.sub(r":(?:ref|doc|term|abbr|command|program|option|file|guilabel|menuselection|kbd|envvar|samp|class|meth|func|mod|py:\w+|rfc|pep|dfn|manpage|config:option|oslo.config:option|oslo.config:group)?:`([^`<]*?)\s*<[^>]*>`", r"\1", s)
    s = re.sub(r":([\w.:-]+):`([^`]*)`", lambda m: m.group(2).split("/")[-1] if m.group(2).startswith("/") and m.group(1) in ("doc", "ref") else m.group(2), s)  # a :code:`/path/` keeps its path
    s = re.sub(r"`([^`<]+?)\s*<[^>]*>`__?", r"\1", s)
    lit = []  # ``literals`` kept verbatim: ``foo/**/bar`` is no strong emphasis, ``a\b`` no escape

    def keep(m):
        lit.append(m.group(1))
        return f"\x02{len(lit) - 1}\x03"
    s = re.sub(r"``(.+?)``", keep, s)
    s = re.sub(r"`([^`]+)`_{1,2}", r"\1", s)
    s = re.sub(r"`([^`]+)`", r"\1", s)
    s = re.sub(r"\*\*(.+?)\*\*", r"\1", s)
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", s)
    s = re.sub(r"\|([\w -]+)\|", r"\1", s)
    s = re.sub(r"\\(.)", r"\1", s)
    return re.sub(r"\x02(\d+)\x03", lambda m: lit[int(m.group(1))], s)


def rst_table(lines, i):
    """Rows of an RST simple or grid table starting at its top border lines[i], as "a | b" strings,
    and the index of the first line after the table."""
    n = len(lines)
    border = lines[i]
    rows, cur = [], None
    if border.strip().startswith("+"):  # grid table: cells between the border's "+" columns
        cuts = [m.start() for m in re.finditer(r"\+", border)]
        j = i + 1
        while j < n and lines[j].strip().startswith(("|", "+")):
            l = lines[j]
            if re.match(r"^\s*\+[-=+]+\+\s*$", l):
                if cur:
                    rows.append(cur)
                cur = None
            else:
                cells = [l[a + 1:b].strip() for a, b in zip(cuts, cuts[1:])]
                cur = cells if cur is None else [(x + " " + y).strip() for x, y in zip(cur, cells)]
            j += 1
        if cur:
            rows.append(cur)
    else:  # simple table: columns from the runs of "=" in the top border
        spans = [m.start() for m in re.finditer(r"=+", border)]
        borders, j = 1, i + 1
        while j < n:
            l = lines[j]
            if re.match(r"^\s*=+( +=+)*\s*$", l):
                borders += 1
                j += 1
                if borders >= 3 or j >= n or not lines[j].strip():
                    break
                continue
            if not l.strip() or re.match(r"^\s*-+( +-+)*\s*$", l):
                if not l.strip():
                    break
                j += 1
                continue
            cells = [l[a:b].strip() for a, b in zip(spans, spans[1:] + [len(l) + 1])]
            if not cells[0] and rows:
                rows[-1] = [(x + " " + y).strip() for x, y in zip(rows[-1], cells)]
            else:
                rows.append(cells)
            j += 1
    out = []
    for r in rows:
        cells = [squash(rst_inline(re.sub(r"\.\.\s+[\w:-]+::\s*\S*", "", c))) for c in r]  # directives inside cells
        if any(cells):
            out.append(" | ".join(c for c in cells if c))
    return out, j


def convert_rst(text):
    lines = text.replace("\t", "    ").split("\n")
    blocks = []
    para = []
    i = 0
    n = len(lines)
    adorn = re.compile(r"^([=\-~^\"'`#*+_.:])\1{2,}\s*$")

    def flush():
        if para:
            s = squash(rst_inline(" ".join(para)))
            if s:
                blocks.append(("p", s))
            para.clear()

    def indent_of(l):
        return len(l) - len(l.lstrip(" "))

    def take_indented(start, base):
        body = []
        j = start
        while j < n and (not lines[j].strip() or indent_of(lines[j]) > base):
            body.append(lines[j])
            j += 1
        while body and not body[-1].strip():
            body.pop()
        return body, j

    while i < n:
        line = lines[i]
        stripped = line.strip()
        # section titles (with or without overline)
        if i + 1 < n and stripped and adorn.match(lines[i + 1]) and len(lines[i + 1].strip()) >= len(stripped) and not adorn.match(line):
            flush()
            blocks.append(("h", rst_inline(stripped)))
            i += 2
            continue
        if adorn.match(line) and i + 2 < n and lines[i + 1].strip() and adorn.match(lines[i + 2]):
            flush()
            blocks.append(("h", rst_inline(lines[i + 1].strip())))
            i += 3
            continue
        if adorn.match(line):
            i += 1
            continue
        m = re.match(r"^(\s*)\.\.\s+([\w:-]+)::\s*(.*)$", line)
        if m:
            flush()
            base = len(m.group(1))
            name = m.group(2).lower()
            arg = m.group(3).strip()
            j = i + 1
            while j < n and re.match(r"^\s+:[\w -]+:", lines[j]):  # directive options
                j += 1
            body, j = take_indented(j, base)
            if name == "only" and re.search(r"latex|man|texinfo", arg):  # print/man variant of an html block (borg option tables)
                pass
            elif name in RST_CODE:
                dedent = min([indent_of(b) for b in body if b.strip()] or [0])
                code = "\n".join(b[dedent:] for b in body).strip("\n")
                if code.strip():
                    blocks.append(("v", code))
            elif name == "list-table":  # "* - a" / "  - b" items: one "a | b" row a block
                flush()
                if arg:
                    blocks.append(("p", squash(rst_inline(arg))))
                rows = []
                for b in body:
                    t = b.strip()
                    m2 = re.match(r"^(\*\s+)?-\s*(.*)$", t)
                    if t.startswith("* ") and m2:
                        rows.append([m2.group(2)])
                    elif m2 and rows and not t.startswith("*"):
                        rows[-1].append(m2.group(2))
                    elif t and rows:
                        rows[-1][-1] += " " + t
                for r in rows:
                    cells = [squash(rst_inline(c)) for c in r]
                    if any(cells):
                        blocks.append(("p", " | ".join(c for c in cells if c)))
            elif name in RST_PYDOM and (name != "class" or any(b.strip() for b in body)):  # API entries
                # (MicroPython library reference): signature(s), then description; a docutils ".. class:: css-name"
                # with no body stays dropped
                sigs = [arg] if arg else []
                k = 0
                while k < len(body) and body[k].strip():  # further signatures on the lines right below
                    sigs.append(body[k].strip())
                    k += 1
                if sigs:
                    blocks.append(("p", squash(rst_inline("; ".join(sigs)))))
                rest = body[k:]
                dedent = min([indent_of(b) for b in rest if b.strip()] or [0])
                blocks.extend(convert_rst("\n".join(b[dedent:] for b in rest)))
            elif name in RST_ADMON:
                dedent = min([indent_of(b) for b in body if b.strip()] or [0])
                text_lines = [b[dedent:] for b in body]
                if arg and name in RST_NOTE and body and body[0].strip():  # ".. note:: first line" continued below: one paragraph
                    text_lines.insert(0, arg)
                elif arg and name not in ("only", "list-table", "table", "highlight"):
                    para.append(arg)
                sub = convert_rst("\n".join(text_lines))
                flush()
                blocks.extend(sub)
            # other directives (include, toctree, image, figure, end, path, ...) dropped
            i = j
            continue
        if re.match(r"^\s*\.\.(\s|$)", line):  # comment or target
            flush()
            base = indent_of(line)
            _, j = take_indented(i + 1, base)
            i = j
            continue
        if not stripped:
            flush()
            i += 1
            continue
        # literal block introduced by "::"
        if stripped.endswith("::"):
            text_part = stripped[:-2].rstrip()
            if text_part:
                para.append(text_part + (":" if not stripped.endswith(" ::") else ""))
            flush()
            base = indent_of(line)
            j = i + 1
            while j < n and not lines[j].strip():
                j += 1
            body, j2 = take_indented(j, base)
            if body:
                dedent = min([indent_of(b) for b in body if b.strip()] or [0])
                code = "\n".join(b[dedent:] for b in body).strip("\n")
                if code.strip():
                    blocks.append(("v", code))
                i = j2
            else:
                i += 1
            continue
        # list items start a new paragraph
        if re.match(r"^\s*([*+-]|#\.|\d+[.)])\s+", line) and para:
            flush()
        # simple tables ("===  ===" borders) and grid tables ("+---+---+"): one "a | b" row a block
        if re.match(r"^\s*=+( +=+)+\s*$", line) or re.match(r"^\s*\+(-+\+){2,}\s*$", line):
            flush()
            rows, i = rst_table(lines, i)
            blocks.extend(("p", r) for r in rows)
            continue
        # simple table borders
        if re.match(r"^\s*[=+\-| ]{6,}$", line) and set(stripped) <= set("=+-| "):
            flush()
            i += 1
            continue
        para.append(stripped)
        i += 1
    flush()
    return blocks


def md_inline(s):
    s = re.sub(r"!\[[^\]]*\]\(<[^>]*>\)", "", s)           # images, <destination> (may hold parentheses)
    s = re.sub(r"(?<!!)\[([^\]]*)\]\(<[^>]*>\)", r"\1", s)   # links, <destination>
    s = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", s)            # images
    s = re.sub(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)", "", s)  # badges
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)          # links
    s = re.sub(r"(?<![\]#])\[([^\]]*)\]\[[^\]]*\](?![\[#])", r"\1", s)  # reference links, not [a][b][c] chains (Jeedom #[obj][eq][cmd]#)
    s = re.sub(r"<br\s*/?>", " ", s)
    code = []  # code spans are kept verbatim: `sub-<label>` is no tag, `*_bold.json` and `'_'` are no emphasis

    def keep(m):
        code.append(m.group(1))
        return f"\x02{len(code) - 1}\x03"
    s = re.sub(r"\{\{\s*(urls|ids)\.[\w.\[\]'\"]+\s*\}\}", "", s)  # Eleventy site data, in code spans too
    s = re.sub(r"`([^`]*)`", keep, s)
    s = re.sub(r"\{(?:[.#][\w-]+|(?:target|rel|title|class|id|style|width|height)=)(?:[^{}\n]|\{\{[^{}\n]*\}\})*\}", "", s)  # markdown-it-attrs {.fr-link target="_blank"}
    s = re.sub(r"(?<!\{)\{(?: +(?:[.#][\w-]+|width=|height=)[^{}\n]*|# +[\w-]+ *)\}(?!\})", "", s)  # pandoc attributes with a space (dhis2: "## Title { #anchor }", "{ .center width=50% }", "{# anchor }")
    s = re.sub(r"<[^>]+>", "", s)
    s = re.sub(r"\*\*(.+?)\*\*", r"\1", s)
    s = re.sub(r"(?<!\w)__(.+?)__(?!\w)", r"\1", s)
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", s)
    s = re.sub(r"(?<![\w])_(?!\s)([^_]+?)(?<!\s)_(?![\w])", r"\1", s)
    s = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|<%.*?%>", "", s)
    s = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>~])", r"\1", s)
    s = re.sub(r"\x02(\d+)\x03", lambda m: code[int(m.group(1))], s)
    # only entities closed by ";": html.unescape alone turns the query string "?a=1&divider=10" into "?a=1÷r=10"
    return re.sub(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);", lambda m: html.unescape(m.group(0)), s)


def html_cell_lines(cell):
    """Split an HTML-rich table cell into lines (lists become items)."""
    c = re.sub(r"<li[^>]*>", "\n- ", cell)
    c = re.sub(r"</?(ul|ol|p|div)[^>]*>|</li>|<br\s*/?>", "\n", c)
    out = []
    for l in c.split("\n"):
        l = squash(md_inline(l))
        if l and l != "-":
            out.append(l)
    return out


def _mdx_tag_end(text, i):
    """End (index after '>') of the JSX tag opening at text[i] == '<', braces and quotes balanced."""
    depth, q, j, n = 0, None, i + 1, len(text)
    while j < n:
        c = text[j]
        if q:
            if c == q:
                q = None
        elif c in "\"'`" and depth:
            q = c
        elif c == '"' and text[j - 1] == "=":  # an attribute value (path="Settings > Recording") may hold ">"
            q = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ">" and depth <= 0:
            return j + 1
        j += 1
    return n


def _mdx_faq(block):
    """An exported FAQ object ({title: "...", content: `...`} entries) as '### title' and its text."""
    out = []
    for t, c in re.findall(r"title:\s*(\"(?:[^\"\\]|\\.)*\"|`[^`]*`|'(?:[^'\\]|\\.)*')\s*,\s*content:\s*"
                           r"(`[^`]*`|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')", block, re.S):
        out.append("### " + " ".join(t[1:-1].split()))
        out.append(textwrap.dedent(c[1:-1].strip("\n")).replace('\\"', '"'))
    return "\n\n".join(out)


def mdx_to_md(text):
    """Docusaurus MDX (Meshtastic docs): imports and exported JS dropped (an exported FAQ object kept as
    headings and answers), JSX tags spread over several lines joined onto one so the tag is stripped
    whole, button links dropped with their label, {/* comments */} dropped; fenced code left as it is."""
    parts = re.split(r"(^[ \t]*```.*?^[ \t]*```[^\n]*$)", text, flags=re.S | re.M)
    out = []
    for k, seg in enumerate(parts):
        if k % 2:
            out.append(seg)
            continue
        seg = re.sub(r"^import\s+(?:[^;\n]*?|\{[^}]*\})\s+from\s+[\"'][^\"']+[\"'];?[ \t]*$", "", seg, flags=re.M)
        seg = re.sub(r"\{/\*.*?\*/\}", "", seg, flags=re.S)
        # Frigate's <NavPath path="Settings > Recording" />: the UI path is the text the sentence needs
        seg = re.sub(r"<NavPath\s+path=\"([^\"]*)\"\s*/>", r"\1", seg)
        # a JS list rendered inline ({labels.split("\n").map((label) => ( <li>...</li> ))}): code, no prose
        seg = re.sub(r"^[ \t]*\{[^\n]*\.map\(.*?^[ \t]*\)\)\}[ \t]*$", "", seg, flags=re.S | re.M)
        lines, kept, i = seg.split("\n"), [], 0
        while i < len(lines):
            if re.match(r"export\s", lines[i]):
                j = i
                if not re.search(r"[;}\)]\s*$", lines[i]) or re.search(r"[\{\(\[]\s*$", lines[i]):
                    j = i + 1
                    while j < len(lines) and not re.match(r"[\}\)\]]", lines[j]):
                        j += 1
                block = "\n".join(lines[i:j + 1])
                if "title:" in block and "content:" in block:
                    kept.append(_mdx_faq(block))
                i = j + 1
                continue
            kept.append(lines[i])
            i += 1
        seg = "\n".join(kept)
        res, i = [], 0
        for m in re.finditer(r"<(/?)([A-Za-z][\w.]*)", seg):
            if m.start() < i:
                continue
            end = _mdx_tag_end(seg, m.start())
            tag = seg[m.start():end]
            if not tag.endswith(">") or len(tag) > 3000:
                continue                # a lone "<word" in the prose, no tag
            res.append(seg[i:m.start()])
            i = end
            if not m.group(1) and m.group(2) == "Link" and "button" in tag and not tag.endswith("/>"):
                close = seg.find("</Link>", end)
                if close >= 0:
                    i = close + len("</Link>")
                continue
            if "\n" in tag or "{" in tag:
                res.append("")          # a JSX tag: gone, whatever it spans
            else:
                res.append(tag)         # a plain HTML tag on one line: the converter reads it (tables)
        res.append(seg[i:])
        out.append("".join(res))
    return "".join(out)


def _js_strings(src):
    """The string literals of a JS array/object literal, nested as the arrays that hold them:
    '[["a", "b"], ["c"]]' -> [["a", "b"], ["c"]] (object keys and bare values are skipped)."""
    stack, out, i, n = [], None, 0, len(src)
    while i < n:
        c = src[i]
        if c in "\"'`":
            j, buf = i + 1, []
            while j < n and src[j] != c:
                if src[j] == "\\" and j + 1 < n:
                    j += 1
                    buf.append({"n": "\n", "t": " "}.get(src[j], src[j]))
                else:
                    buf.append(src[j])
                j += 1
            if stack:
                stack[-1].append("".join(buf))
            i = j + 1
            continue
        if c == "[":
            stack.append([])
        elif c == "]" and stack:
            done = stack.pop()
            if stack:
                stack[-1].append(done)
            else:
                out = done
        i += 1
    return out or []


def _js_array_after(src, key):
    """The text of the array literal that follows `key:` in src ('' if none)."""
    m = re.search(r"\b" + key + r"\s*:\s*\[", src)
    if not m:
        return ""
    depth, q, j = 0, None, m.end() - 1
    while j < len(src):
        c = src[j]
        if q:
            if c == "\\":
                j += 1
            elif c == q:
                q = None
        elif c in "\"'`":
            q = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return src[m.end() - 1:j + 1]
        j += 1
    return ""


def _nunjucks_cell(cell):
    c = re.sub(r"(?m)^\s*[*-]\s+", "<li>", cell.strip())
    c = re.sub(r"\s+[*]\s+(?=\S)", "<li>", c) if c.startswith("<li>") else c
    c = re.sub(r"\s+", " ", c)   # one line an item: <li>\n text\n</li>
    return " ".join(html_cell_lines(c)).replace("|", "/")


def nunjucks_components(text):
    """Eleventy/Nunjucks component calls of the DSFR docs (cartes.gouv.fr): {{ component("table", {title,
    headers: [...], data: [[...], ...]}) }} becomes a pipe table (its title a line before it; cells with
    <ul>/<li> or "* " lists flattened); {% set x = [{title: "...", content: "..."}, ...] %} (accordion
    items) becomes '### title' and its text; any other multi-line {{ component(...) }} or {% ... %} is
    dropped (download buttons, swagger embeds, template logic)."""
    def table(m):
        body = m.group(0)
        title = re.search(r"\btitle\s*:\s*\"([^\"]*)\"", body.split("headers")[0].split("data")[0])
        rows = []
        headers = _js_strings(_js_array_after(body, "headers"))
        if headers and all(isinstance(h, str) for h in headers):
            rows.append(headers)
        rows += [r for r in _js_strings(_js_array_after(body, "data")) if isinstance(r, list)]
        lines = ["| " + " | ".join(_nunjucks_cell(c) for c in r if isinstance(c, str)) + " |" for r in rows]
        head = [title.group(1), ""] if title else []
        return "\n\n" + "\n".join(head + lines) + "\n\n"

    def items(m):
        out = []
        for t, c in re.findall(r"title\s*:\s*\"((?:[^\"\\]|\\.)*)\"\s*,\s*content\s*:\s*\"((?:[^\"\\]|\\.)*)\"", m.group(0), re.S):
            out.append("### " + " ".join(t.split()))
            out.extend(html_cell_lines(c))
        return "\n\n" + "\n\n".join(out) + "\n\n"
    text = re.sub(r"\{\{-?\s*component\(\s*[\"']table[\"'].*?\}\)\s*-?\}\}", table, text, flags=re.S)
    text = re.sub(r"\{%-?\s*set\s+\w+\s*=\s*\[\s*\{.*?\]\s*-?%\}", items, text, flags=re.S)
    text = re.sub(r"\{\{-?\s*component\(.*?\}\)\s*-?\}\}", "", text, flags=re.S)
    text = re.sub(r"\{%-?[^%]*\n[^%]*-?%\}", "", text)
    return text


_DSFR_DIRECTIVE = re.compile(r"^\s*(:{2,})([A-Za-z][\w-]*)(?:\[((?:[^\[\]]|\[[^\]]*\](?:\([^)]*\))?)*)\])?(\{.*\})?\s*$")


def dsfr_directives(text):
    """Markdown directives of the DSFR documentation (GouvernementFR/dsfr `_part/doc`): storybook embeds,
    tab navigation blocks and layout containers dropped; ::dsfr-doc-pin[label]{required add} anatomy pins
    as '- label add — élément obligatoire|optionnel'; :::dsfr-doc-guideline[✅ À faire] labels as the
    'À faire : ' prefix of the guideline's text; :::fr-table[caption] and :::fr-accordion[title] as a line
    of their label; GitHub alert markers (> [!NOTE]) dropped."""
    out, prefix, skip = [], None, False
    for line in text.split("\n"):
        st = line.strip()
        if skip:
            if re.fullmatch(r":{3,}", st):
                skip = False
            continue
        m = _DSFR_DIRECTIVE.match(line)
        if m:
            name, label, attrs = m.group(2), (m.group(3) or "").strip(), m.group(4) or ""
            if name == "dsfr-doc-tab-navigation":
                skip = True
            elif name == "dsfr-doc-pin" and label:
                add = re.search(r"add=(['\"])(.*?)\1", attrs)
                req = "obligatoire" if re.search(r"required=true", attrs) else "optionnel"
                out += ["", "- " + label + (" " + add.group(2) if add else "") + " — élément " + req]
            elif name == "dsfr-doc-guideline" and label:
                prefix = re.sub(r"^[^\w]+", "", label).strip() + " : "
                out.append("")
            elif name == "dsfr-doc-anatomy":
                out += ["", "Anatomie du composant :", ""]
            elif name in ("fr-table", "fr-accordion") and label:
                out += ["", md_inline(label).strip(" #") + " :", ""]
            else:
                out.append("")
            continue
        if re.fullmatch(r":{3,}(-{3})?", st) or re.fullmatch(r">\s*\[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]", st):
            out.append(">" if st.startswith(">") else "")
            continue
        if prefix and st and not st.startswith("!["):
            if re.match(r"([*+-]|\d+[.)])\s", st) or st.startswith(("|", "```", "<")):
                out += [prefix.rstrip(), ""]
            else:
                line = prefix + st
            prefix = None
        out.append(line)
    return "\n".join(out)


def convert_md(text):
    # Hugo pages whose front matter carries title and id (darktable's dtdocs) often open on a generic
    # heading ("module controls"): the front-matter title becomes the document's first heading
    fm = re.match(r"\A---\n(.*?)\n---\n", text, flags=re.S)
    hugo_title = None
    # (and Hugo pages that carry title and linkTitle, as cht-docs: their first heading is a section's)
    if fm and re.search(r"^title:", fm.group(1), re.M) and re.search(r"^(id|linkTitle):", fm.group(1), re.M):
        hugo_title = re.search(r"^title:\s*(.+?)\s*$", fm.group(1), re.M).group(1).strip("\"'")
    text = re.sub(r"\A---\n.*?\n---(\n|\Z)", "", text, flags=re.S)   # (a page of front matter only may end on ---)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    # Jekyll alert includes (Valetudo: {% include alert.html type="warning" content="text and a table" %}): their content is kept
    text = re.sub(r"\{%-?\s*include\s+[\w./-]+\s+(?:\w+=\"[^\"]*\"\s+)*content=\"(.*?)\"\s*(?:\w+=\"[^\"]*\"\s*)*-?%\}", r"\1", text, flags=re.S)
    if re.search(r"^import\s.+\sfrom\s+[\"']|^export\s+(const|function|default)\b", text, re.M):
        text = mdx_to_md(text)
    # Nunjucks demo shortcodes (GC Design System: {% examplesPreview %}<gcds-button>Submit</gcds-button>{% endexamplesPreview %}):
    # their body is a rendered example whose label text would read as stray words in the prose
    text = re.sub(r"\{%-?\s*(\w*Preview|viewCode)\b.*?%\}.*?\{%-?\s*end\1\s*-?%\}", "", text, flags=re.S)
    if re.search(r"\{\{-?\s*component\(|\{%-?\s*(set|from)\b", text):
        text = nunjucks_components(text)
    if re.search(r"^\s*:{2,}(dsfr-doc-|fr-(table|accordion)\b)", text, re.M):
        text = dsfr_directives(text)
    lines = text.split("\n")
    blocks = [("h", hugo_title)] if hugo_title else []
    para = []
    i, n = 0, len(lines)

    def flush():
        if para:
            s = squash(md_inline(" ".join(para)))
            if s and s not in ("-", "*"):
                blocks.append(("p", s))
            para.clear()

    while i < n:
        line = lines[i]
        st = line.strip()
        m1 = re.match(r"^\s*```([^`]+)```\s*$", line)   # a one-line ```code``` is a verbatim line, not a fence opening
        if m1:
            flush()
            blocks.append(("v", m1.group(1).strip()))
            i += 1
            continue
        if re.match(r"^\s*(```|~~~)", line):
            flush()
            fence = st[:3]
            j = i + 1
            body = []
            while j < n and not lines[j].strip().startswith(fence):
                body.append(lines[j])
                j += 1
            code = "\n".join(body).strip("\n")
            code = re.sub(r"\{\{\s*(urls|ids)\.[\w.\[\]'\"]+\s*\}\}", "", code)  # Eleventy site data (cartes.gouv.fr: {{ urls.api_entrepot }})
            if code.strip():
                blocks.append(("v", code))
            i = j + 1
            continue
        m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            flush()
            h = squash(md_inline(m.group(2)))
            if h:
                blocks.append(("h", h))
            i += 1
            continue
        if i + 1 < n and st and re.match(r"^\s*(=+|-+)\s*$", lines[i + 1]) and not st.startswith("|") and not para:
            flush()
            blocks.append(("h", squash(md_inline(st))))
            i += 2
            continue
        if st.startswith(":::"):
            flush()
            rest = re.sub(r"^:{3,}\s*\w*\s*", "", st)   # ::::info opens an admonition that nests another
            if rest:
                blocks.append(("p", squash(md_inline(rest))))
            i += 1
            continue
        if re.match(r"^\?{3,}(\s|$)", st) and not re.match(r"^\?\?\?\+?\s*[a-z][\w-]*\s*(\"|$)", st):
            # markdown-it "???"/"????" collapsibles (cartes.gouv.fr): a bare marker closes one, a free-text title is kept whole
            flush()
            rest = re.sub(r"^\?{3,}\s*", "", st)
            if rest:
                blocks.append(("p", squash(md_inline(rest))))
            i += 1
            continue
        if re.match(r"^(!!!|\?\?\?\+?)\s*[\w-]+|^===\s+[\"“]", st):   # MkDocs admonition or tab: keep its title only
            flush()
            rest = re.sub(r"^(!!!|\?\?\?\+?)\s*[\w-]+\s*|^===\s+", "", st).strip().strip("\"“”").strip()
            if rest:
                blocks.append(("p", squash(md_inline(rest))))
            i += 1
            continue
        if (not st.startswith("|") and "|" in st and i + 1 < n
                and re.fullmatch(r"\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*", lines[i + 1])):
            # GFM table without leading pipes ("a | b" / "--- | ---" / rows)
            flush()
            while i < n and lines[i].strip() and "|" in lines[i]:
                row = lines[i].strip().strip("|")
                if not re.fullmatch(r"[\s:|-]*", row):
                    parts = [" ".join(html_cell_lines(c)) for c in row.split("|")]
                    s = " | ".join(p for p in parts if p)
                    if s:
                        blocks.append(("p", s))
                i += 1
            continue
        if st.startswith("<table"):  # an HTML table (GitBook writes them on one line): one "a | b" row a block
            flush()
            j = i
            while "</table>" not in lines[j] and j + 1 < n:
                j += 1
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", "\n".join(lines[i:j + 1]), re.S):
                cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)
                s = " | ".join(p for p in (" ".join(html_cell_lines(c)) for c in cells) if p)
                if s:
                    blocks.append(("p", s))
            i = j + 1
            continue
        if st.startswith("|"):
            flush()
            while i < n and lines[i].strip().startswith("|"):
                row = lines[i].strip().strip("|")
                if not re.fullmatch(r"[\s:|+-]*", row):   # (|------+--------| rules of kramdown tables too)
                    cells = [c for c in row.split("|")]
                    parts = [" ".join(html_cell_lines(c)) for c in cells]
                    s = " | ".join(p for p in parts if p)
                    if s:
                        blocks.append(("p", s))
                i += 1
            continue
        if not st or re.fullmatch(r"(\*\s*){3,}|(-\s*){3,}|(_\s*){3,}", st):
            flush()
            i += 1
            continue
        if re.match(r"^\s{0,3}\[[^\]^]+\]:\s*\S+\s*$", line):   # link reference definition
            flush()
            i += 1
            continue
        if re.match(r"^\s*(<\/?(ul|ol|table|tr|td|th|div|p|details|summary)[^>]*>\s*)+$", line):
            flush()
            i += 1
            continue
        if re.match(r"^\s*([*+-]|\d+[.)])\s+", line) and para:
            flush()
        st = re.sub(r"^([*+-])\s+\[[ xX]\]\s+", r"\1 ", st)
        if st.startswith(">"):
            st = st.lstrip("> ").strip()
            if not st:
                flush()
                i += 1
                continue
        if st.endswith("\\") and not st.endswith("\\\\"):  # hard line break: "text\" at a line end
            st = st[:-1].rstrip()
        para.append(st)
        i += 1
    flush()
    return blocks


# ---------------------------------------------------------------------------
# Chunking
# ---------------------------------------------------------------------------
SENT_SPLIT = re.compile(r"(?<=[.!?;:»)])\s+(?=[«\"(A-ZÀ-ÖØ-Þ0-9])")


def split_long(text, limit=MAX_LEN):
    if len(text) <= limit:
        return [text]
    pieces = []
    units = text.split("\n") if "\n" in text else SENT_SPLIT.split(text)
    if len(units) == 1:
        return []  # one unbreakable run: dropped rather than cut mid-sentence
    cur = ""
    sep = "\n" if "\n" in text else " "
    for u in units:
        if len(u) > limit:
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.extend(split_long(u, limit))
            continue
        if cur and len(cur) + len(sep) + len(u) > limit:
            pieces.append(cur)
            cur = u
        else:
            cur = cur + sep + u if cur else u
    if cur:
        pieces.append(cur)
    return pieces


def chunk_blocks(blocks):
    """Yield (heading_path, text) chunks of MIN_LEN..MAX_LEN characters."""
    sections = []  # (heading, [unit, ...])
    heading = ""
    cur = []
    code = set()
    for kind, text in blocks:
        if kind == "h":
            if cur:
                sections.append((heading, cur))
            heading, cur = text, [text]
            continue
        for u in split_long(text):
            cur.append(u)
            if kind == "v":
                code.add(u)
    if cur:
        sections.append((heading, cur))

    chunks = []
    for heading, units in sections:
        buf = ""
        for u in units:
            if buf and len(buf) + 2 + len(u) > MAX_LEN:
                chunks.append([heading, buf])
                buf = u
            else:
                buf = buf + "\n\n" + u if buf else u
        if buf:
            chunks.append([heading, buf])
    # merge short chunks with a neighbour
    merged = []
    for h, t in chunks:
        if merged and (len(merged[-1][1]) < MIN_LEN or len(t) < MIN_LEN) and len(merged[-1][1]) + 2 + len(t) <= MAX_LEN:
            merged[-1][1] += "\n\n" + t
        else:
            merged.append([h, t])
    out = []
    for h, t in merged:
        if not MIN_LEN <= len(t) <= MAX_LEN:
            continue
        code_chars = sum(len(u) for u in t.split("\n\n") if u in code)
        if code_chars > 0.5 * len(t):
            continue
        out.append((h, t))
    return out


def prose_ok(text):
    letters = sum(ch.isalpha() for ch in text)
    return letters >= 0.55 * len(text)


def detect_lang(path, default):
    if default:
        return default
    p = "/" + path.lower()
    if "/fr/" in p or p.startswith("/fr") or "/fr-" in p:
        return "fr"
    return "en"


def slug(s):
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")


# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# AsciiDoc (pve-docs, LinuxCNC, API guidelines): headings, paragraphs, lists, tables, listings
# ---------------------------------------------------------------------------
def adoc_inline(s, attrs=None):
    attrs = attrs or {}
    s = re.sub(r"\(\(\((.*?)\)\)\)", "", s)  # hidden index terms (((a, b)))
    s = re.sub(r"\(\(([^()]+)\)\)", r"\1", s)  # visible index term ((term))
    s = re.sub(r"\{([A-Za-z0-9_-]+)\}", lambda m: attrs.get(m.group(1), m.group(0)), s)
    s = re.sub(r"<<[^,>]+,\s*([^>]+)>>", r"\1", s)
    s = re.sub(r"<<([^>]+)>>", lambda m: m.group(1).replace("_", " ").strip(), s)
    s = re.sub(r"(?:xref|link|mailto|footnote|kbd|menu|btn|pass):[^\[\s]*\[([^\]]*)\]", r"\1", s)
    s = re.sub(r"(?:image|icon):[^\[\s]*\[[^\]]*\]", "", s)
    s = re.sub(r"(https?://\S+?)\[([^\]]*)\]", lambda m: m.group(2) or m.group(1), s)
    s = re.sub(r"\[\[[^\]]*\]\]|\[#[^\]]*\]", "", s)
    s = re.sub(r"\+\+\+(.*?)\+\+\+|\+\+(.*?)\+\+", lambda m: m.group(1) or m.group(2) or "", s)
    s = re.sub(r"(?<![\w+])\+(?!\s)([^+\n]+)(?<!\s)\+(?![\w+])", r"\1", s)  # not "Ctrl + Shift + S"
    s = re.sub(r"``([^`']+?)''", r'"\1"', s)  # ``quoted'' (AsciiDoc 8)
    s = re.sub(r"`+([^`]+)`+", r"\1", s)
    s = re.sub(r"\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", lambda m: m.group(1) or m.group(2), s)
    s = re.sub(r"__(.+?)__|(?<![\w])_(?!\s)([^_]+?)(?<!\s)_(?![\w])", lambda m: m.group(1) or m.group(2), s)
    s = re.sub(r"(?<![\w#])#([^#\n]+)#(?![\w#])", r"\1", s)
    s = re.sub(r"(?<![\w'])'(?=[^\s'])([^'\n]*?[^\s'])'(?![\w'])", r"\1", s)  # 'emphasis' (AsciiDoc 8)
    s = re.sub(r"\s\+$", "", s)
    s = re.sub(r"\\(\((?:C|R|TM)\)|\*)", r"\1", s)  # escaped replacements: \(C) is "(C)", \* a star
    return html.unescape(s)


def _adoc_cols(attr_line):
    m = re.search(r'cols\s*=\s*"([^"]*)"', attr_line or "")
    if not m:
        return None
    n = 0
    for part in m.group(1).split(","):
        k = re.match(r"\s*(\d+)\*", part)
        n += int(k.group(1)) if k else 1
    return n or None


# attributes defined outside the documents (pve-docs: asciidoc/asciidoc-pve.conf)
ADOC_ATTRS = {"pve": "Proxmox VE", "PVE": "Proxmox VE", "proxmoxGmbh": "Proxmox Server Solutions GmbH",
              "forum": "https://forum.proxmox.com/[Proxmox VE Community Forum]",
              "forum-url": "https://forum.proxmox.com/", "webwiki-url": "https://pve.proxmox.com/wiki/",
              "webwiki": "https://pve.proxmox.com/wiki/[Proxmox VE Wiki]",
              "ceph": "http://ceph.com[Ceph]", "cephdocs-url": "https://docs.ceph.com/en/squid",
              "website": "https://www.proxmox.com/",
              "pricing-url": "https://proxmox.com/en/proxmox-virtual-environment/pricing"}
ADOC_SKIP = ("manvolnum", "wiki")  # ifdef:: blocks only for man pages or the wiki (NAME, SYNOPSIS, See Also)

# attributes of the Zalando API guidelines (index.adoc), applied to documents that use its rule keywords:
# {MUST}, {PUT}, {404}, {cursor}, {ETag} are plain words; {RFC-9110}#section[text] a link ({id} stays: URL templates)
_GUIDE_WORDS = ("MUST SHOULD MAY GET PUT POST PATCH DELETE HEAD OPTIONS TRACE ALL x00 2xx 3xx 4xx 5xx use document "
                "q sort fields embed offset cursor limit xyz_id created created_at modified modified_at type href "
                "first prev self next last query items Idempotency-Key X-Flow-ID X-Tenant-ID X-Sales-Channel "
                "X-Frontend-Type X-Device-Type X-Device-OS X-Mobile-Advertising-ID X-App-Domain x-extensible-enum "
                "ETag If-Match If-None-Match Last-Modified If-Modified-Since If-Unmodified-Since If-Range Accept "
                "Accept-Charset Accept-Encoding Accept-Language Expect Content-Type Content-Encoding Content-Language "
                "Content-Length Content-Location Content-Range Content-Disposition Location Retry-After Vary "
                "Cache-Control Expires Prefer Preference-Applied Sunset Deprecation Warning Flow-ID").split()
GUIDE_ATTRS = {w: w for w in _GUIDE_WORDS}
GUIDE_ATTRS.update({str(c): str(c) for c in range(100, 600)})
GUIDE_ATTRS.update({f"rfc-status-{c}": "" for c in range(100, 600)})
GUIDE_ATTRS.update({f"RFC-{n}": f"https://tools.ietf.org/html/rfc{n}" for n in range(1000, 10000)})
GUIDE_ATTRS.update({
    "RFC-9754": "https://tools.ietf.org/html/rfc9745", "MUST-NOT": "MUST NOT", "MUST-SHOULD": "MUST/SHOULD",
    "MUST-SHOULD-MAY": "MUST/SHOULD/MAY", "YES": "Yes", "NO": "No", "AT": "(!)", "CODE-START": "", "CODE-END": "",
    "dash": "–", "do-not-use": "do not use", "do-not-document": "do not document", "entity-tag": "<entity-tag>",
    "GET-with-Body": "GET with body", "GET-with-body": "GET with body", "DELETE-with-Body": "DELETE with body",
    "Cache-Control-no-store": "Cache-Control: no-store", "RFC-safe": "safe", "RFC-idempotent": "idempotent",
    "RFC-cacheable": "cacheable", "e_tag": "etag", "BCP47": "https://tools.ietf.org/html/bcp47",
    "ISO-8601": "https://en.wikipedia.org/wiki/ISO_8601", "ISO-639-1": "https://en.wikipedia.org/wiki/ISO_639-1",
    "ISO-3166-1-alpha-2": "https://en.wikipedia.org/wiki/ISO_3166-1_alpha-2",
    "ISO-4217": "https://en.wikipedia.org/wiki/ISO_4217", "IEEE-754-2008": "https://en.wikipedia.org/wiki/IEEE_754",
    "GTIN": "https://en.wikipedia.org/wiki/GTIN", "ECMA-262": "https://www.ecma-international.org/ECMA-262"})
GUIDE_ATTRS.update({k: "https://zalando.net/" + k for k in (  # internal links: only their [text] is kept
    "api-guild nakadi-api api-audience-narrative functional-name-registry customer-naming-decision zally-ui "
    "api-review-proc api-portal techradar-public api-repository glossary SRE-open-tracing json-schema-validation "
    "iana-link-relations iana-media-types").split()})
GUIDE_MARK = re.compile(r"\{(MUST|SHOULD|MAY|GET|PUT|POST|PATCH|api-guild)\}")  # not {DELETE}: a KeePassXC Auto-Type key


def convert_adoc(text):
    lines = text.replace("\t", "    ").split("\n")
    blocks, para, attrs = [], [], dict(ADOC_ATTRS)
    if GUIDE_MARK.search(text):
        attrs.update(GUIDE_ATTRS)
    i, n = 0, len(lines)
    last_attr = ""

    def flush():
        if para:
            s = squash(adoc_inline(" ".join(re.sub(r"\s\+$", "", l) for l in para), attrs))
            if s:
                blocks.append(("p", s))
            para.clear()

    while i < n:
        line = lines[i]
        st = line.strip()
        if st.startswith("////"):
            flush()
            j = i + 1
            while j < n and not lines[j].strip().startswith("////"):
                j += 1
            i = j + 1
            continue
        if st.startswith("//"):
            i += 1
            continue
        m = re.match(r"^:([A-Za-z0-9_-]+):\s*(.*)$", st)
        if m and not para:
            attrs[m.group(1)] = m.group(2)
            i += 1
            continue
        m = re.match(r"^ifdef::(%s)\[\]$" % "|".join(ADOC_SKIP), st)
        if m:
            flush()
            j = i + 1
            while j < n and lines[j].strip() != "endif::%s[]" % m.group(1):
                j += 1
            i = j + 1
            continue
        if re.match(r"^(include|ifdef|ifndef|ifeval|endif|image|toc|video)::", st):
            flush()
            i += 1
            continue
        if re.fullmatch(r"(-{4,}|\.{4,}|`{3}.*)", st):
            flush()
            fence = "```" if st.startswith("```") else st
            j = i + 1
            body = []
            # AsciiDoc 8 (pve-docs) closes a ---- block on any run of 4 or more of the same character
            while j < n and lines[j].strip() != fence and not (
                    fence[0] == "-" and re.fullmatch(r"-{4,}", lines[j].strip())):
                body.append(lines[j])
                j += 1
            if "".join(body).strip():
                blocks.append(("v", "\n".join(body).strip("\n")))
            i = j + 1
            continue
        if re.fullmatch(r"[|!,:]={3,}", st):
            flush()
            cols = _adoc_cols(last_attr)
            j = i + 1
            rows, cells = [], []
            while j < n and not re.fullmatch(r"[|!,:]={3,}", lines[j].strip()):
                t = lines[j].strip()
                if not t:
                    if cells and not cols:
                        rows.append(cells)
                        cells = []
                elif t.startswith("|"):
                    parts = [c.strip() for c in re.split(r"(?<!\\)\|", t)[1:]]
                    if not cols and cells and len(parts) > 1:
                        rows.append(cells)
                        cells = []
                    cells.extend(parts)
                elif cells:
                    cells[-1] = (cells[-1] + " " + t).strip()
                if cols and len(cells) >= cols:
                    rows.append(cells[:cols])
                    cells = cells[cols:]
                j += 1
            if cells:
                rows.append(cells)
            for r in rows:
                s = " | ".join(squash(adoc_inline(c.replace("\\|", "|"), attrs)) for c in r if c.strip())
                if s:
                    blocks.append(("p", s))
            i = j + 1
            last_attr = ""
            continue
        m = re.match(r"^(={1,6}|#{1,6})\s+(.+?)\s*$", line)
        if m:
            flush()
            blocks.append(("h", squash(adoc_inline(m.group(2), attrs))))
            i += 1
            if m.group(1) == "=" and i < n and re.fullmatch(r"[^<>:]+<[^<>@\s]+@[^<>\s]+>", lines[i].strip()):
                i += 1  # the document header's author line ("Name <mail>"); its :attributes: follow
            continue
        if i + 1 < n and st and not para and re.fullmatch(r"(=+|-+|~+|\^+|\++)", lines[i + 1].strip()) \
                and abs(len(lines[i + 1].strip()) - len(st)) <= 2 and len(st) > 1:
            blocks.append(("h", squash(adoc_inline(st, attrs))))
            i += 2
            continue
        if re.fullmatch(r"\[.*\]", st):
            flush()
            last_attr = st
            i += 1
            continue
        if re.fullmatch(r"(={4,}|\*{4,}|_{4,}|\+{4,}|--)", st):
            flush()
            i += 1
            continue
        if not st or st == "+":  # a lone + joins a block to the list item above
            flush()
            i += 1
            continue
        if re.match(r"^\.[A-Za-z0-9]", st) and not para:
            blocks.append(("p", squash(adoc_inline(st[1:], attrs))))
            i += 1
            continue
        if re.match(r"^(\*+|-|\.+|\d+\.)\s+", st) and para:
            flush()
        m = re.match(r"^(NOTE|TIP|IMPORTANT|WARNING|CAUTION):\s+(.*)$", st)
        if m:
            flush()
            st = m.group(1).capitalize() + ": " + m.group(2)
        m = re.match(r"^(.+?)(::|;;)\s*(.*)$", st)
        if m and not para and not st.startswith(("http", "-")) and not re.match(r"\*(\s|\*|$)", st):  # *term*:: too
            para.append(m.group(1) + ":" + (" " + m.group(3) if m.group(3) else ""))
            i += 1
            continue
        st = re.sub(r"^(\*+|\.+)\s+", "- ", st)
        para.append(st)
        i += 1
    flush()
    return blocks


CONVERTERS = {"md": convert_md, "rst": convert_rst, "adoc": convert_adoc}
