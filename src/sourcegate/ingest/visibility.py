"""Whether a reader sees a piece of text, decided as a renderer would draw it: from the effective
style of the text (HTML: the cascade of the page's `<style>` rules and inline styles through its
ancestors; DOCX: run properties through the style chain and the document defaults; PDF: the
graphics state when the text is shown), then thresholds on what is drawn: a size a person can
read, a colour that stands out from what is behind it, a box that is on the page and not clipped
or scaled away. Text a reader does not see is not indexed: a document must not say one thing to
its readers and another to whatever quotes it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Text smaller than this (in points, after every scaling) is not read by anyone: 2 pt.
MIN_TEXT_PT = 2.0
# Text whose colour is this close to what is behind it (WCAG contrast ratio; 1 = same colour, 21 =
# black on white) is not seen: #f0f0f0 on white is 1.14, #ddd 1.36, #999 2.85.
MIN_CONTRAST = 1.2
# An element moved this far (CSS px) out of the page's top or left edge is off the page.
OFF_PAGE_PX = 500.0

RGB = tuple[float, float, float]
WHITE: RGB = (1.0, 1.0, 1.0)


def luminance(rgb: RGB) -> float:
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(min(1.0, max(0.0, c))) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: RGB, b: RGB) -> float:
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def over(fg: RGB, alpha: float, bg: RGB) -> RGB:
    """`fg` painted with `alpha` over `bg`."""
    alpha = min(1.0, max(0.0, alpha))
    return tuple(f * alpha + b * (1 - alpha) for f, b in zip(fg, bg))  # type: ignore[return-value]


def stands_out(fg: RGB, alpha: float, bg: RGB) -> bool:
    return contrast(over(fg, alpha, bg), bg) >= MIN_CONTRAST


# -- HTML: CSS values ------------------------------------------------------------------------

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
_LENGTH = re.compile(rf"^({_NUMBER})\s*([a-z%]*)$", re.I)
_FONT_KEYWORDS = {"xx-small": 9.0, "x-small": 10.0, "small": 13.0, "medium": 16.0, "large": 18.0,
                  "x-large": 24.0, "xx-large": 32.0, "xxx-large": 48.0}
_ABSOLUTE_UNITS = {"px": 1.0, "pt": 4 / 3, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4,
                   "q": 96 / 101.6}
VIEWPORT = (1280.0, 800.0)  # the vw and vh of a desktop window


def length_px(value: str, font_px: float, percent_of: float | None = None) -> float | None:
    """A CSS length in px (`12pt`, `-9999px`, `0`, `.5em`, `-100%` of `percent_of`); None when it is
    not a length this reads (`auto`, `calc(...)`)."""
    m = _LENGTH.match(value.strip())
    if m is None:
        return None
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit in _ABSOLUTE_UNITS:
        return number * _ABSOLUTE_UNITS[unit]
    if unit in ("em", "ex", "ch", "cap", "ic", "lh"):
        return number * font_px * (1.0 if unit in ("em", "lh", "ic") else 0.5)
    if unit in ("rem", "rlh"):
        return number * 16.0
    if unit in ("vw", "vh", "vmin", "vmax"):
        side = {"vw": VIEWPORT[0], "vh": VIEWPORT[1], "vmin": min(VIEWPORT), "vmax": max(VIEWPORT)}[unit]
        return number * side / 100
    if unit == "%":
        return number * percent_of / 100 if percent_of is not None else None
    if unit == "" and number == 0:
        return 0.0
    return None


def _split_args(inner: str) -> list[str]:
    return [a for a in re.split(r"[\s,/]+", inner.strip()) if a]


def _channel(v: str, scale: float) -> float | None:
    try:
        return float(v[:-1]) / 100 if v.endswith("%") else float(v) / scale
    except ValueError:
        return None


def _hsl(h: float, s: float, l: float) -> RGB:
    import colorsys

    return colorsys.hls_to_rgb((h / 360) % 1.0, l, s)


def css_color(value: str) -> tuple[RGB, float] | None:
    """(rgb in 0..1, alpha) of a CSS colour (`#fff`, `rgb(1 2 3 / 50%)`, `hsla(...)`, `white`,
    `transparent`); None for what is not a colour read here (`currentColor`, `var(--x)`)."""
    v = value.strip().lower()
    if v == "transparent":
        return (0.0, 0.0, 0.0), 0.0
    if v.startswith("#"):
        h = v[1:]
        if len(h) in (3, 4):
            h = "".join(c * 2 for c in h)
        if len(h) in (6, 8) and all(c in "0123456789abcdef" for c in h):
            rgb = tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))
            return rgb, (int(h[6:8], 16) / 255 if len(h) == 8 else 1.0)  # type: ignore[return-value]
        return None
    m = re.match(r"^(rgba?|hsla?)\((.*)\)$", v)
    if m:
        args = _split_args(m.group(2))
        if len(args) not in (3, 4):
            return None
        alpha = _channel(args[3], 1.0) if len(args) == 4 else 1.0
        if m.group(1).startswith("rgb"):
            chans = [_channel(a, 255.0) for a in args[:3]]
            if None in chans or alpha is None:
                return None
            return tuple(chans), alpha  # type: ignore[return-value]
        try:
            hue = float(args[0].removesuffix("deg"))
        except ValueError:
            return None
        s, l = _channel(args[1], 100.0), _channel(args[2], 100.0)
        if s is None or l is None or alpha is None:
            return None
        return _hsl(hue, s, l), alpha
    if re.fullmatch(r"[a-z]+", v) and v not in ("inherit", "initial", "unset", "currentcolor", "revert", "none"):
        from matplotlib.colors import CSS4_COLORS  # the CSS named colours (a dependency already)

        hexa = CSS4_COLORS.get(v)
        return css_color(hexa) if hexa else None
    return None


def declarations(style: str | None) -> dict[str, str]:
    """`prop: value` pairs of a style attribute or rule body, lower-cased, without `!important`."""
    out: dict[str, str] = {}
    for part in (style or "").replace("\n", " ").split(";"):
        prop, sep, value = part.partition(":")
        if sep:
            value = re.sub(r"\s*!\s*important\s*$", "", value.strip(), flags=re.I)
            out[prop.strip().lower()] = value.strip()
    return out


def _background(value: str) -> tuple[RGB, float] | None | bool:
    """The colour a `background`/`background-color` value paints: (rgb, alpha); False for an image
    or gradient (a colour this cannot know); None for nothing read."""
    if re.search(r"url\(|gradient\(|image\(", value, re.I):
        return False
    for token in re.findall(r"#[0-9a-f]+|(?:rgba?|hsla?)\([^)]*\)|[a-z]+", value, re.I):
        c = css_color(token)
        if c is not None:
            return c
    return None


def _scales(transform: str) -> tuple[float, float, float, float]:
    """(x scale, y scale, x shift px, y shift px) of a CSS transform list (rotations and skews left
    as they are)."""
    sx = sy = 1.0
    tx = ty = 0.0
    for name, inner in re.findall(r"([a-z0-9]+)\(([^)]*)\)", transform.lower()):
        args = _split_args(inner)
        try:
            if name in ("scale", "scale3d"):
                a = float(args[0].rstrip("%")) / (100 if args[0].endswith("%") else 1)
                b = float(args[1].rstrip("%")) / (100 if args[1].endswith("%") else 1) if len(args) > 1 else a
                sx, sy = sx * a, sy * b
            elif name == "scalex":
                sx *= float(args[0])
            elif name == "scaley":
                sy *= float(args[0])
            elif name == "matrix" and len(args) == 6:
                a, b, c, d = (float(x) for x in args[:4])
                sx, sy = sx * (a * a + b * b) ** 0.5, sy * (c * c + d * d) ** 0.5
                tx, ty = tx + float(args[4]), ty + float(args[5])
            elif name in ("translate", "translatex", "translatey", "translate3d"):
                vals = [length_px(a, 16.0) or 0.0 for a in args]
                if name == "translatey":
                    ty += vals[0] if vals else 0.0
                else:
                    tx += vals[0] if vals else 0.0
                    ty += vals[1] if len(vals) > 1 and name != "translatex" else 0.0
        except (ValueError, IndexError):
            continue
    return abs(sx), abs(sy), tx, ty


@dataclass(frozen=True)
class CssState:
    """What an element passes to what it holds: inherited properties and what shows behind it."""
    font_px: float = 16.0
    color: RGB = (0.0, 0.0, 0.0)
    color_alpha: float = 1.0
    background: RGB = WHITE
    background_known: bool = True  # False over an image: the text's contrast cannot be judged
    opacity: float = 1.0
    scale: float = 1.0  # the smaller of the x and y scales of the transforms above
    indented_away: bool = False  # text-indent far out of the box (inherited)

    def text_shows(self) -> bool:
        """Whether text drawn with this state can be read: big enough, and standing out."""
        if self.indented_away or self.font_px * self.scale * 0.75 < MIN_TEXT_PT:
            return False
        if not self.background_known:
            return self.color_alpha * self.opacity > 0.05
        return stands_out(self.color, self.color_alpha * self.opacity, self.background)


def element_state(decls: dict[str, str], parent: CssState) -> CssState | None:
    """The state of an element with these declarations inside `parent`; None when the element
    and all it holds are not drawn where a reader sees them."""
    get = decls.get
    if get("display", "").lower() == "none" or get("visibility", "").lower() in ("hidden", "collapse"):
        return None
    font_px = parent.font_px
    size = get("font-size", "").lower()
    if size:
        if size in _FONT_KEYWORDS:
            font_px = _FONT_KEYWORDS[size]
        elif size == "smaller":
            font_px = parent.font_px / 1.2
        elif size == "larger":
            font_px = parent.font_px * 1.2
        else:
            px = length_px(size, parent.font_px, parent.font_px)
            if px is not None:
                font_px = max(0.0, px)
    opacity = parent.opacity
    if get("opacity"):
        o = get("opacity", "").strip()
        try:
            opacity *= float(o[:-1]) / 100 if o.endswith("%") else float(o)
        except ValueError:
            pass
    if opacity <= 0.01:
        return None
    scale = parent.scale
    if get("transform"):
        sx, sy, tx, ty = _scales(get("transform", ""))
        scale *= min(sx, sy)
        if scale <= 1e-3 or min(tx, ty) <= -OFF_PAGE_PX * 2:
            return None
    if get("zoom"):
        z = get("zoom", "").strip()
        try:
            factor = float(z[:-1]) / 100 if z.endswith("%") else float(z)
        except ValueError:
            factor = 0.0
        if factor > 0:
            scale *= factor
    if _moved_off_page(decls, font_px) or _clipped_away(decls, font_px):
        return None
    indented_away = parent.indented_away
    if get("text-indent"):
        indent = length_px(get("text-indent", ""), font_px, VIEWPORT[0])
        indented_away = indent is not None and indent <= -OFF_PAGE_PX
    color, color_alpha = parent.color, parent.color_alpha
    if get("color"):
        c = css_color(get("color", ""))
        if c is not None:
            color, color_alpha = c
    if get("-webkit-text-fill-color"):
        c = css_color(get("-webkit-text-fill-color", ""))
        if c is not None:
            color, color_alpha = c
    background, known = parent.background, parent.background_known
    for prop in ("background", "background-color", "background-image"):
        if get(prop):
            bg = _background(get(prop, ""))
            if bg is False:
                known = False
            elif bg is not None:
                rgb, alpha = bg
                if alpha > 0:
                    background, known = over(rgb, alpha, background), known or alpha >= 0.99
    return CssState(font_px=font_px, color=color, color_alpha=color_alpha, background=background,
                    background_known=known, opacity=opacity, scale=scale, indented_away=indented_away)


def _moved_off_page(decls: dict[str, str], font_px: float) -> bool:
    position = decls.get("position", "static").lower()
    sides = ("left", "top") if position in ("absolute", "fixed", "relative", "sticky") else ()
    for prop in (*sides, "margin-left", "margin-top", "inset-inline-start", "inset-block-start"):
        if prop in decls:
            px = length_px(decls[prop], font_px, VIEWPORT[0])
            if px is not None and px <= -OFF_PAGE_PX:
                return True
            if prop in ("left", "top") and px is not None and px >= 20 * VIEWPORT[0]:
                return True
    if position in ("absolute", "fixed", "relative", "sticky"):
        for prop in ("right", "bottom"):  # right: -9999px pushes the box out past the right edge
            px = length_px(decls.get(prop, ""), font_px, VIEWPORT[0]) if prop in decls else None
            if px is not None and px <= -20 * VIEWPORT[0]:
                return True
    return False


def _clipped_away(decls: dict[str, str], font_px: float) -> bool:
    """`clip: rect(...)` or `clip-path` to (almost) nothing, or a box of (almost) no height or width
    that hides what overflows it."""
    clip = decls.get("clip", "")
    m = re.match(r"^rect\((.*)\)$", clip.strip().lower())
    if m and decls.get("position", "").lower() in ("absolute", "fixed"):
        edges = _split_args(m.group(1).replace(",", " "))
        if len(edges) == 4:
            top, right, bottom, left = (None if e == "auto" else length_px(e, font_px) for e in edges)
            if (right is not None and left is not None and right - left <= 1) or \
               (bottom is not None and top is not None and bottom - top <= 1):
                return True
    path = decls.get("clip-path", "").strip().lower()
    m = re.match(r"^inset\((.*)\)$", path)
    if m:  # percentages of the box (px insets of a box of unknown size are kept)
        args = _split_args(m.group(1).split("round")[0])
        if args and all(a.endswith("%") for a in args):
            v = [float(a[:-1]) if re.fullmatch(_NUMBER, a[:-1]) else 0.0 for a in args][:4]
            t, r, b, l = {1: lambda: v * 4, 2: lambda: v + v, 3: lambda: [v[0], v[1], v[2], v[1]],
                          4: lambda: v}[len(v)]()
            if t + b >= 100 or r + l >= 100:
                return True
    m = re.match(r"^(circle|ellipse)\(\s*([^\s)]+)", path)
    if m and length_px(m.group(2), font_px, 100.0) == 0:
        return True
    if re.match(r"^polygon\(", path):
        points = re.findall(r"(-?[\d.]+)(?:px|%)?\s+(-?[\d.]+)(?:px|%)?", path)
        if points and len(set(points)) == 1:
            return True
    overflow = {decls.get(p, "").lower() for p in ("overflow", "overflow-x", "overflow-y")} - {"", "visible"}
    if overflow:  # what does not fit in the box is cut off (or scrolled inside a box of no size)
        for prop in ("height", "max-height", "width", "max-width"):
            if prop in decls:
                px = length_px(decls[prop], font_px, None)
                if px is not None and px <= 1:
                    return True
    return False


def hides_on_its_own(style: str | None) -> bool:
    """Whether an inline style hides its element and all it holds, read without the page around
    it (for markup too deep for a tree): not drawn, transparent, off the page, clipped or scaled
    away, text too small to read, or coloured like the white page."""
    decls = declarations(style)
    if not decls:
        return False
    state = element_state(decls, CssState())
    if state is None:
        return True
    if state.indented_away or state.font_px * state.scale * 0.75 < MIN_TEXT_PT:
        return True
    # colour against what is behind needs the ancestors: only a transparent text is judged here
    return state.color_alpha * state.opacity <= 0.05


# -- HTML: the page's own stylesheets --------------------------------------------------------

_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
# Properties that change whether text is seen; rules that set none of them are not matched.
_VISUAL = re.compile(r"^(?:display|visibility|opacity|font-size|color|-webkit-text-fill-color|background(?:-color|-image)?|"
                     r"position|left|top|right|bottom|margin-left|margin-top|inset-\S+|clip|clip-path|overflow(?:-x|-y)?|"
                     r"(?:max-)?(?:height|width)|transform|text-indent|zoom)$")
MAX_STYLE_RULES = 5000  # selectors read from a page's stylesheets
MAX_COMPLEX_SELECTORS = 100  # of which matched by soupsieve (a pass over the page each)
_SIMPLE_SELECTOR = re.compile(r"^(\*|[a-z][a-z0-9-]*)?((?:[.#][\w-]+)*)$", re.I)


def stylesheet_rules(soup) -> list[tuple[str, dict[str, str]]]:
    """(selector, declarations) of the page's `<style>` rules that set a property of `_VISUAL`, in
    document order (the later wins, as for rules of the same specificity). Rules inside `@media`
    and the like are read as if they applied; selectors of states (`:hover`, `::before`) are
    passed over; past MAX_STYLE_RULES selectors, the rest are not read."""
    out: list[tuple[str, dict[str, str]]] = []
    for style in soup.find_all("style"):
        css = _CSS_COMMENT.sub(" ", style.get_text())
        for m in _CSS_RULE.finditer(css):
            decls = {k: v for k, v in declarations(m.group(2)).items() if _VISUAL.match(k)}
            if not decls:
                continue
            for sel in m.group(1).split(","):
                sel = sel.strip()
                if sel and not sel.startswith("@") and ":" not in sel:
                    out.append((sel, decls))
                if len(out) >= MAX_STYLE_RULES:
                    return out
    return out


def _sheet_declarations(soup) -> dict[int, dict[str, str]]:
    """The declarations the page's stylesheets give each element (by id()), later rules winning.
    Simple selectors (`p`, `.note`, `#legal`, `div.x.y`) are matched in one pass over the page;
    the first MAX_COMPLEX_SELECTORS others (`#legal > p`) by soupsieve, one pass each."""
    by_key: dict[tuple[str, str], list[tuple[int, str | None, frozenset, frozenset, dict]]] = {}
    matched: dict[int, list[tuple[int, dict[str, str]]]] = {}
    complex_left = MAX_COMPLEX_SELECTORS
    for order, (selector, decls) in enumerate(stylesheet_rules(soup)):
        m = _SIMPLE_SELECTOR.match(selector)
        if m:
            tag = None if m.group(1) in (None, "*") else m.group(1).lower()
            parts = re.findall(r"([.#])([\w-]+)", m.group(2))
            classes = frozenset(v for k, v in parts if k == ".")
            ids = frozenset(v for k, v in parts if k == "#")
            key = ("#", next(iter(ids))) if ids else (".", next(iter(classes))) if classes else ("", tag or "*")
            by_key.setdefault(key, []).append((order, tag, classes, ids, decls))
            continue
        if complex_left <= 0:
            continue
        complex_left -= 1
        try:
            for el in soup.select(selector):
                matched.setdefault(id(el), []).append((order, decls))
        except Exception:  # a selector soupsieve does not read: the rule is passed over
            continue
    if by_key:
        for el in soup.find_all(True):
            cls = el.get("class") or []
            cls = set(cls.split() if isinstance(cls, str) else cls)
            eid = el.get("id")
            keys = [("", el.name), ("", "*")] + [(".", c) for c in cls] + ([("#", eid)] if isinstance(eid, str) else [])
            for key in keys:
                for order, tag, classes, ids, decls in by_key.get(key, ()):
                    if (tag is None or tag == el.name) and classes <= cls and (not ids or ids == {eid}):
                        matched.setdefault(id(el), []).append((order, decls))
    out: dict[int, dict[str, str]] = {}
    for key, rules in matched.items():
        merged: dict[str, str] = {}
        for _, decls in sorted(rules, key=lambda r: r[0]):
            merged.update(decls)
        out[key] = merged
    return out


def drop_invisible(soup, root=None) -> None:
    """Remove from a parsed page (BeautifulSoup) the elements and text a browser does not show:
    each element's declarations (the page's `<style>` rules, then its inline style) are applied
    over what it inherits (`element_state`); an element not drawn goes with all it holds, and a
    text whose own state cannot be read (too small, too faint for its background) goes alone."""
    from bs4 import Comment, NavigableString, Tag

    sheet = _sheet_declarations(soup)
    drop: list = []
    stack = [(root or soup, CssState())]
    while stack:
        el, state = stack.pop()
        for child in list(el.children):
            if isinstance(child, Tag):
                attrs = child.attrs or {}
                decls = dict(sheet.get(id(child), {}))
                style = attrs.get("style")
                if isinstance(style, str):
                    decls.update(declarations(style))
                if child.name in ("font",) and isinstance(attrs.get("color"), str):
                    decls.setdefault("color", attrs["color"])
                if isinstance(attrs.get("bgcolor"), str):
                    decls.setdefault("background-color", attrs["bgcolor"])
                if "hidden" in attrs:
                    child_state = None
                else:
                    child_state = element_state(decls, state) if decls else state
                if child_state is None:
                    drop.append(child)
                else:
                    stack.append((child, child_state))
            elif isinstance(child, NavigableString) and not isinstance(child, Comment):
                if child.strip() and not state.text_shows():
                    drop.append(child)
    for node in drop:
        if isinstance(node, Tag):
            if not node.decomposed:
                node.decompose()
        else:
            node.extract()


# -- DOCX: run properties through the style chain ----------------------------------------------

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Word's highlight colours (w:highlight) by name
_HIGHLIGHTS = {"black": "000000", "blue": "0000FF", "cyan": "00FFFF", "green": "00FF00", "magenta": "FF00FF",
               "red": "FF0000", "yellow": "FFFF00", "white": "FFFFFF", "darkBlue": "000080", "darkCyan": "008080",
               "darkGreen": "008000", "darkMagenta": "800080", "darkRed": "800000", "darkYellow": "808000",
               "darkGray": "808080", "lightGray": "C0C0C0"}


def hex_rgb(value: str | None) -> RGB | None:
    """`FF0000` as rgb in 0..1; None for `auto`, a missing or unreadable value."""
    if not value or len(value) != 6:
        return None
    try:
        return tuple(int(value[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]
    except ValueError:
        return None


def _toggle(el) -> bool:
    return el.get(f"{_W}val", "true").lower() not in ("0", "false", "off")


def shading(el) -> RGB | None:
    """The fill of a `w:shd` under `el` (a pPr, tcPr or rPr), or None (none, `auto`, clear)."""
    shd = el.find(f"{_W}shd") if el is not None else None
    if shd is None:
        return None
    return hex_rgb(shd.get(f"{_W}fill"))


def _rpr_fields(rpr) -> dict:
    """The properties of an `w:rPr` that decide whether its text is seen."""
    out: dict = {}
    if rpr is None:
        return out
    for child in rpr:
        tag = child.tag
        if tag == f"{_W}vanish":
            out["vanish"] = _toggle(child)
        elif tag == f"{_W}color":
            out["color"] = child.get(f"{_W}val") or "auto"
        elif tag == f"{_W}sz":
            try:
                out["sz"] = float(child.get(f"{_W}val"))
            except (TypeError, ValueError):
                pass
        elif tag == f"{_W}shd":
            out["shd"] = hex_rgb(child.get(f"{_W}fill"))
        elif tag == f"{_W}highlight":
            out["highlight"] = hex_rgb(_HIGHLIGHTS.get(child.get(f"{_W}val") or ""))
    return out


class DocxStyles:
    """The run properties Word applies to a run: the document defaults, then the paragraph's style
    (the default paragraph style when it names none) and the styles it is based on, then the
    run's character style and its bases, then the run's own properties; and what lies behind the
    text (the run's shading or highlight, its paragraph's, its cell's, the page colour)."""

    def __init__(self, styles_element, document_element):
        self._rpr: dict[str, dict] = {}
        self._ppr_shd: dict[str, RGB | None] = {}
        self._based: dict[str, str | None] = {}
        self.default_paragraph: str | None = None
        self.default_character: str | None = None
        defaults = styles_element.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr") if styles_element is not None else None
        self.defaults = _rpr_fields(defaults)
        for st in (styles_element.findall(f"{_W}style") if styles_element is not None else ()):
            sid = st.get(f"{_W}styleId")
            self._rpr[sid] = _rpr_fields(st.find(f"{_W}rPr"))
            self._ppr_shd[sid] = shading(st.find(f"{_W}pPr"))
            base = st.find(f"{_W}basedOn")
            self._based[sid] = base.get(f"{_W}val") if base is not None else None
            if _toggle_default(st):
                kind = st.get(f"{_W}type")
                if kind == "paragraph":
                    self.default_paragraph = sid
                elif kind == "character":
                    self.default_character = sid
        background = document_element.find(f"{_W}background") if document_element is not None else None
        self.page = hex_rgb(background.get(f"{_W}color")) if background is not None else None
        self._chains: dict[str | None, dict] = {}

    def _chain(self, sid: str | None) -> dict:
        """The properties of a style with those of the styles it is based on under them."""
        if sid in self._chains:
            return self._chains[sid]
        order, seen, cur = [], set(), sid
        while cur is not None and cur not in seen and cur in self._rpr:
            seen.add(cur)
            order.append(cur)
            cur = self._based.get(cur)
        merged: dict = {}
        for s in reversed(order):
            merged.update(self._rpr[s])
        self._chains[sid] = merged
        return merged

    def paragraph_shading(self, p_style: str | None, ppr) -> RGB | None:
        own = shading(ppr)
        if own is not None:
            return own
        cur, seen = p_style or self.default_paragraph, set()
        while cur is not None and cur not in seen:
            seen.add(cur)
            if self._ppr_shd.get(cur) is not None:
                return self._ppr_shd[cur]
            cur = self._based.get(cur)
        return None

    def run_shows(self, p_style: str | None, r_style: str | None, rpr, behind: RGB | None) -> bool:
        """Whether a run's text is seen: not hidden (`w:vanish`), at least MIN_TEXT_PT, and a colour
        that stands out from what is behind it (`auto` always does)."""
        props = dict(self.defaults)
        props.update(self._chain(p_style or self.default_paragraph))
        props.update(self._chain(r_style or self.default_character))
        props.update(_rpr_fields(rpr))
        if props.get("vanish"):
            return False
        if props.get("sz", 2 * MIN_TEXT_PT) < 2 * MIN_TEXT_PT:  # half-points
            return False
        color = hex_rgb(props.get("color"))
        if color is None:
            return True
        bg = props.get("shd") or props.get("highlight") or behind or self.page or WHITE
        return stands_out(color, 1.0, bg)


def _toggle_default(st) -> bool:
    value = st.get(f"{_W}default")
    return value is not None and value.lower() in ("1", "true", "on")
