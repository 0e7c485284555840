"""Templates in article wikitext: which carry content, and how that content reads as text.

Wikipedia articles are full of templates; most are citations, navigation boxes,
maintenance tags or pronunciation guides that add nothing to plain text, and are dropped.
A known set carries content (``{{convert|12|km}}``, ``{{birth date|1879|3|14}}``,
``{{lang|fr|...}}``, ``{{nowrap|...}}``, lists, ...): each has a small renderer here.
Infoboxes become key/value facts; ``{{short description}}`` becomes the ``description``
fact; hatnotes (``{{main|X}}``) become links without text.
"""

from __future__ import annotations

import re
from typing import Callable, Protocol

from mwparserfromhell.nodes import Template
from mwparserfromhell.wikicode import Wikicode

from wiki_sim.ingest import values as V

_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_WS = re.compile(r"\s+")
INFOBOX = re.compile(r"^(infobox\b|(automatic |sub|infra)?(taxobox|speciesbox)$|chembox$|drugbox$|geobox$)")
# Infobox fields that hold layout or media, not facts about the subject.
SKIP_FACT_KEY = re.compile(
    r"(^|_| )(image\w*|img|caption|alt|signature\w*|logo\w*|map\w*|pushpin\w*|footnotes?|module\d*|embed|"
    r"child|nocat|bgcolou?r|colou?r|width|upright|size|float|label_position|mapframe\w*|coordinates_footnotes|"
    r"onlysourced|noicon|qid|fetchwikidata|suppressfields)(_|\d| |$)", re.I)
MAX_FACT_CHARS = 600
_MEDIA_FILE = re.compile(r"\.(svg|png|jpe?g|gif|tiff?|webp|ogg|oga|ogv|mp3|wav|webm|pdf)$", re.I)


class RendererLike(Protocol):
    def render(self, code: Wikicode) -> str: ...
    def add_link(self, target: str, anchor: str) -> None: ...
    def add_fact(self, key: str, value: str, source: str) -> None: ...
    def fact_value(self, code: Wikicode) -> str: ...


def template_name(tpl: Template) -> str:
    """Normalized name: comments dropped, ``_`` as space, lower case, no ``Template:`` prefix."""
    name = _WS.sub(" ", _COMMENT.sub("", str(tpl.name)).replace("_", " ")).strip().lower()
    return name[len("template:"):].strip() if name.startswith("template:") else name


class Args:
    """A template's parameters, each rendered at most once (rendering collects links)."""

    def __init__(self, tpl: Template, r: RendererLike):
        self.r = r
        self._pos: dict[int, Wikicode] = {}
        self._named: dict[str, Wikicode] = {}
        for p in tpl.params:
            name = str(p.name).strip()
            if name.isdigit():
                self._pos[int(name)] = p.value
            else:
                self._named[name.lower()] = p.value
        self._cache: dict[object, str] = {}

    def _get(self, key: object, code: Wikicode | None) -> str:
        if code is None:
            return ""
        if key not in self._cache:
            self._cache[key] = self.r.render(code).strip()
        return self._cache[key]

    def pos(self, i: int) -> str:
        return self._get(i, self._pos.get(i))

    def named(self, *names: str) -> str:
        for n in names:
            v = self._get(n, self._named.get(n))
            if v:
                return v
        return ""

    def raw_named(self, name: str) -> str:
        code = self._named.get(name)
        return code.strip_code().strip() if code is not None else ""

    def positionals(self) -> list[str]:
        return [self.pos(i) for i in sorted(self._pos)]

    @property
    def npos(self) -> int:
        return max(self._pos, default=0)


Handler = Callable[[Args], str]


def _first(a: Args) -> str:
    return a.pos(1)


def _second_or_first(a: Args) -> str:
    return a.pos(2) or a.pos(1)


def _last(a: Args) -> str:
    vals = [v for v in a.positionals() if v]
    return vals[-1] if vals else ""


def _date(a: Args) -> str:
    y, m, d = a.pos(1), a.pos(2), a.pos(3)
    if V.as_int(y) is None:  # {{start date|1879-03-14}} style: a free-text date
        return y
    return V.format_date(y, m, d)


def _death_date_and_age(a: Args) -> str:
    died = _date(a)
    nums = [V.as_int(a.pos(i)) for i in range(1, 7)]
    if nums[0] is not None and nums[3] is not None:
        m1, m2 = V.month_number(a.pos(5)) if a.pos(5) else None, V.month_number(a.pos(2)) if a.pos(2) else None
        age = V.age_between(nums[3], m1, nums[5], nums[0], m2, nums[2])
        return f"{died} (aged {age})"
    return died


def _death_year_and_age(a: Args) -> str:
    y, born = V.as_int(a.pos(1)), V.as_int(a.pos(2))
    if y is not None and born is not None:
        return f"{y} (aged {y - born - 1}–{y - born})"
    return a.pos(1)


def _as_of(a: Args) -> str:
    when = V.format_date(a.pos(1), a.pos(2), a.pos(3)) if a.pos(1) else ""
    lead = "as of" if a.raw_named("lc") else "As of"
    return f"{lead} {when}".strip()


def _marriage(a: Args) -> str:
    name, start, end = a.pos(1), a.pos(2), a.pos(3)
    span = "–".join(p for p in (start, end) if p)
    return f"{name} (m. {span})" if span else name


def _list_items(a: Args) -> str:
    return "\n".join(f"- {v}" for v in a.positionals() if v)


def _sortname(a: Args) -> str:
    first, last = a.pos(1), a.pos(2)
    shown = f"{first} {last}".strip()
    if not a.raw_named("nolink"):
        target = a.pos(3) or shown
        if target:
            a.r.add_link(target, shown)
    return shown


def _ill(a: Args) -> str:
    shown = a.named("lt") or a.pos(1)
    if a.pos(1):
        a.r.add_link(a.pos(1), shown)
    return shown


def _hatnote_links(a: Args) -> str:
    for i in range(1, a.npos + 1):
        target = a.pos(i)
        if target:
            a.r.add_link(target, a.named(f"l{i}") or target)
    return ""


def _short_description(a: Args) -> str:
    desc = a.pos(1)
    if desc and desc.lower() != "none":
        a.r.add_fact("description", desc, "shortdesc")
    return ""


def _val(a: Args) -> str:
    num = a.pos(1)
    if a.pos(2):
        num += f"±{a.pos(2)}"
    if a.named("e"):
        num += f"×10^{a.named('e')}"
    unit = a.named("u", "ul")
    return f"{a.named('p')}{num}{' ' + unit if unit else ''}{a.named('s')}"


def _frac(a: Args) -> str:
    p = [v for v in a.positionals() if v]
    if len(p) == 1:
        return f"1/{p[0]}"
    if len(p) == 2:
        return f"{p[0]}/{p[1]}"
    if len(p) >= 3:
        return f"{p[0]} {p[1]}/{p[2]}"
    return ""


def _height(a: Args) -> str:
    parts = [f"{a.named(k)} {k}" for k in ("m", "cm", "ft", "in") if a.named(k)]
    return " ".join(parts)


def _nihongo(a: Args) -> str:
    rest = [v for v in (a.pos(2), a.pos(3)) if v]
    return f"{a.pos(1)} ({', '.join(rest)})" if rest and a.pos(1) else a.pos(1) or ", ".join(rest)


def _quote(a: Args) -> str:
    text = a.named("text", "quote") or a.pos(1)
    return f"\n\n{text}\n\n" if text else ""


def _coord(a: Args) -> str:
    return V.format_coord(a.positionals())


def _ordinal(a: Args) -> str:
    n = V.as_int(a.pos(1))
    return V.ordinal(n) if n is not None else a.pos(1)


def _const(text: str) -> Handler:
    return lambda a: text


def _prefix(text: str) -> Handler:
    return lambda a: f"{text}{a.pos(1)}" if a.pos(1) else ""


def _suffix(text: str) -> Handler:
    return lambda a: f"{a.pos(1)}{text}" if a.pos(1) else ""


def _join(sep: str) -> Handler:
    return lambda a: sep.join(v for v in a.positionals() if v)


HANDLERS: dict[str, Handler] = {}


def _register(names: str, handler: Handler) -> None:
    for n in names.split(","):
        HANDLERS[n.strip()] = handler


_register("birth date,dob,birth date and age,bda,birth-date and age,start date,end date,start date and age,"
          "end date and age,film date,death date,dts,date,start-date,end-date,birth-date,death-date,"
          "release date,released", _date)
_register("death date and age,dda,death-date and age", _death_date_and_age)
_register("death year and age", _death_year_and_age)
_register("birth year and age,birth based on age as of date", _first)
_register("as of", _as_of)
_register("circa,c.,ca.", _prefix("c. "))
_register("floruit,fl.", _prefix("fl. "))
_register("reign,r.", lambda a: "r. " + "–".join(v for v in (a.pos(1), a.pos(2)) if v) if a.pos(1) else "")
_register("bc,bce", _suffix(" BC"))
_register("ad,ce", _prefix("AD "))
_register("ordinal", _ordinal)
_register("marriage", _marriage)
_register("convert,cvt", lambda a: V.format_convert(a.positionals()))
_register("val", _val)
_register("e", lambda a: f"×10^{a.pos(1)}" if a.pos(1) else "")
_register("frac,sfrac", _frac)
_register("height", _height)
_register("coord", _coord)
_register("us$,usd", _prefix("US$"))
_register("gbp,£", _prefix("£"))
_register("€,eur,euro", _prefix("€"))
_register("inr,inrconvert", _prefix("₹"))
_register("yen,jpy", _prefix("¥"))
_register("lang,native name,native phrase,script,wikt-lang,langx,audio,sort,lsj,resize,url", _second_or_first)
_register("tooltip,abbr,abbrlink,visible anchor,vanchor,nts,ntsh,nowrap,nobr,small,smaller,big,larger,nobold,"
          "noitalic,sc,smallcaps,sup,sub,math,mvar,var,tmath,not a typo,proper name,proper noun,nastaliq,iast,"
          "flag,flagcountry,flagu,flag country,unicode,unichar,chem2,nobreak,midsize,serif,sans-serif,mono,code,"
          "kbd,samp,strong,em,dfn,smallsup,flatlist,plainlist,plain list,sic,large,huge,vr,ipa,ipa symbol", _first)
_register("transl,transliteration", _last)
_register("linktext,chem", _join(""))
_register("keypress", _join("+"))
_register("simplenuclide2,nuclide2,simplenuclide", _join("-"))
_register("unbulleted list,ubl,ubil,unbulleted indent list,vunblist,bulleted list,blist,ordered list,hlist,"
          "collapsible list,flat list,cslist", _list_items)
_register("nihongo", _nihongo)
_register("quote,cquote,quotation,blockquote,quote box,rquote,centered pull quote", _quote)
_register("lit,literally", lambda a: f"lit. '{a.pos(1)}'" if a.pos(1) else "")
_register("gloss", lambda a: f"'{a.pos(1)}'" if a.pos(1) else "")
_register("sortname", _sortname)
_register("ill,interlanguage link,interlanguage link multi,ill-wd", _ill)
_register("main,see also,further,details,main article,see,further information,also", _hatnote_links)
_register("short description", _short_description)
_register("nbsp,spaces,space,thinsp,sp,nnbsp,zwsp,~", _const(" "))
_register("snd,spaced ndash,spnd,spaced en dash,dash", _const(" – "))
_register("ndash,en dash,–", _const("–"))
_register("mdash,em dash,mdashb,—,spaced mdash", _const("—"))
_register("·,dot,middot,•,bull,bullet", _const(" · "))
_register("!,pipe,!!", _const("|"))
_register("=", _const("="))
_register("'s", _const("'s"))
_register("'", _const("'"))
_register("\"", _const('"'))
_register("angbr", lambda a: f"⟨{a.pos(1)}⟩")
_register("p.", _const("p."))
_register("pp.", _const("pp."))
_register("vol.", _const("vol."))
_register("no.", _const("No."))


def render_template(tpl: Template, r: RendererLike) -> str:
    """Plain text of a template in running text ('' for templates that carry none)."""
    name = template_name(tpl)
    if INFOBOX.match(name):
        infobox_facts(tpl, name, r)
        return ""
    handler = HANDLERS.get(name)
    if handler is not None:
        return handler(Args(tpl, r))
    if name.startswith("lang-"):  # {{lang-fr|texte}}
        return Args(tpl, r).pos(1)
    if ":" in name:
        return _parser_function(tpl, name, r)
    return ""


def _parser_function(tpl: Template, name: str, r: RendererLike) -> str:
    """``{{formatnum:1234}}``, ``{{lc:...}}`` and friends; ``#if``/``#invoke``/... need MediaWiki: dropped."""
    func, _, first = str(tpl.name).partition(":")
    func = func.strip().lower()
    if func.startswith("#"):
        return ""
    from mwparserfromhell import parse

    arg = r.render(parse(first)).strip()
    if func == "formatnum":
        return V.format_number(arg)
    if func in ("lc", "lcfirst"):
        return arg.lower() if func == "lc" else arg[:1].lower() + arg[1:]
    if func in ("uc", "ucfirst"):
        return arg.upper() if func == "uc" else arg[:1].upper() + arg[1:]
    return ""


def infobox_facts(tpl: Template, name: str, r: RendererLike) -> None:
    """Each named, non-layout infobox field with a non-empty value becomes a fact."""
    source = f"infobox:{name}"
    for p in tpl.params:
        key = _WS.sub(" ", str(p.name)).strip()
        if not key or key.isdigit() or SKIP_FACT_KEY.search(key):
            continue
        value = r.fact_value(p.value)
        if value and not _MEDIA_FILE.search(value):
            r.add_fact(key, value[:MAX_FACT_CHARS], source)
