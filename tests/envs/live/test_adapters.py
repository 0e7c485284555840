"""Each adapter against its provider's format, served on loopback, including real recorded
search results from the released WebDancer trajectories."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from envs.formatting import format_search
from envs.live.adapters.reader import MAX_TITLE_CHARS, DirectReader, JinaReader, html_title, parse_jina_text
from envs.live.adapters.search import SerpApiSearch, SerperSearch, WikipediaSearch
from envs.live.adapters.summarizer import ModelSummarizer, parse_summary
from envs.live.errors import NotFound
from envs.live.fakeweb import make_pdf
from envs.live.hostile import TITLES_PAGE_FACT, TITLES_PAGE_TITLE, unclosed_titles_page
from wiki_sim.records import title_to_url

REFERENCE = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference"
_ENTRY = re.compile(r"^\d+\. \[(?P<title>.*)\]\((?P<url>\S*)\)\n(?:Date published: (?P<date>.*)\n)?\n?(?P<snippet>.*)",
                    re.S)


def deadline(seconds: float = 5.0) -> float:
    return time.time() + seconds


def test_serper_web_and_scholar(make_live, fakeweb):
    live = make_live()
    doc = fakeweb.docs[5]
    hits = SerperSearch(live.transport, live.config).search(doc.title, 10, deadline()).value
    assert hits[0].title == doc.title and hits[0].url == fakeweb.page_url(doc.slug)
    assert hits[0].date == f"Jan 1, {doc.year}" and doc.title.split()[0] in hits[0].snippet
    assert [h.title for h in hits] == [d.title for d in fakeweb.rank(doc.title)]
    scholar = SerperSearch(live.transport, live.config, "scholar").search(doc.title, 10, deadline()).value
    assert scholar[0].url.endswith(".pdf") and scholar[0].date == str(doc.year)
    assert scholar[0].snippet.startswith(f"{doc.founder} - Journal of") and "Cited by 1" in scholar[0].snippet
    # The request carried the key in X-API-KEY and the query in the JSON body.
    assert '"q": "' + doc.title in fakeweb.requests("serper")[0][3]


def test_serpapi_web_scholar_and_no_results(make_live, fakeweb):
    live = make_live()
    doc = fakeweb.docs[7]
    hits = SerpApiSearch(live.transport, live.config).search(doc.title, 10, deadline()).value
    assert [h.title for h in hits] == [d.title for d in fakeweb.rank(doc.title)]
    scholar = SerpApiSearch(live.transport, live.config, "scholar").search(doc.title, 10, deadline()).value
    assert scholar[0].date == str(doc.year) and scholar[0].url.endswith(".pdf") and "Cited by 1" in scholar[0].snippet
    # SerpAPI says "hasn't returned any results" in an `error` field of a 200: no hits, no error.
    assert SerpApiSearch(live.transport, live.config).search("qqqq zzzz", 10, deadline()).value == []


@pytest.mark.parametrize("api", ["rest", "action"])
def test_wikipedia_rest_and_action(make_live, fakeweb, api):
    live = make_live(wikipedia_api=api)
    doc = fakeweb.docs[2]
    hits = WikipediaSearch(live.transport, live.config).search(doc.title, 5, deadline()).value
    assert hits[0].title == doc.title
    assert hits[0].url == title_to_url(doc.title)  # the real article URL, as in the simulator
    assert "<span" not in hits[0].snippet and hits[0].snippet
    path = fakeweb.requests("wikipedia")[0][3]
    assert ("/w/rest.php/v1/search/page?" in path) if api == "rest" else ("list=search" in path)


def test_wikipedia_needs_a_descriptive_user_agent(make_live, fakeweb):
    assert make_live(search_sources=("wikipedia",)).search(fakeweb.docs[0].title).ok
    live = make_live(search_sources=("wikipedia",), user_agent="python-requests/2.32.0")
    outcome = live.search(fakeweb.docs[1].title)  # not docs[0]: that one is cached now
    assert not outcome.ok and "HTTP 403" in outcome.reasons()


def test_jina_json_and_text_formats(make_live, fakeweb):
    live = make_live()
    doc = fakeweb.docs[1]
    page = JinaReader(live.transport, live.config).read(fakeweb.page_url(doc.slug), deadline()).value
    assert page.title == doc.title and doc.fact in page.text and "## History" in page.text
    body = f"Title: {doc.title}\n\nURL Source: http://x/\n\nWarning: Target URL returned error 404: Not Found\n\nMarkdown Content:\n{doc.markdown()}"
    title, warning, content = parse_jina_text(body)
    assert title == doc.title and "404" in warning and content.startswith(f"# {doc.title}")
    with pytest.raises(NotFound):
        JinaReader(live.transport, live.config).read("https://example.invalid/x", deadline())
    with pytest.raises(NotFound, match="not a web URL"):
        JinaReader(live.transport, live.config).read("file:///etc/passwd", deadline())


def test_direct_fetch_html_pdf_text_and_404(make_live, fakeweb):
    live = make_live()
    reader = DirectReader(live.transport, live.config)
    doc = fakeweb.docs[3]
    html = reader.read(fakeweb.page_url(doc.slug), deadline()).value
    assert doc.fact in html.text and "## History" in html.text
    assert "Privacy policy" not in html.text and "Log in" not in html.text  # boilerplate removed by trafilatura
    assert html.title.startswith(doc.title)
    pdf = reader.read(fakeweb.page_url(doc.slug, ".pdf"), deadline()).value
    assert doc.fact in " ".join(pdf.text.split()) and pdf.title == doc.title
    txt = reader.read(fakeweb.page_url(doc.slug, ".txt"), deadline()).value
    assert txt.text == doc.markdown()
    with pytest.raises(NotFound) as info:
        reader.read(fakeweb.page_url("doc-999"), deadline())
    assert info.value.status == 404


def test_make_pdf_is_a_real_pdf():
    from pypdf import PdfReader
    import io

    reader = PdfReader(io.BytesIO(make_pdf("T (1)", ["first line", "a (paren) line"])))
    assert reader.metadata["/Title"] == "T (1)"
    assert "a (paren) line" in reader.pages[0].extract_text()


def test_summarizer_and_its_reply_parser(make_live, fakeweb):
    live = make_live()
    doc = fakeweb.docs[4]
    focused = ModelSummarizer(live.transport, live.config).summarize(
        url="u", title=doc.title, text=doc.markdown(), goal="who founded it", deadline=deadline()).value
    assert doc.fact in focused.evidence and focused.summary.startswith("(model)")
    fenced = '<think>hmm {"x": 1}</think>\n```json\n{"rational": "r", "evidence": ["a", "b"], "summary": "s"}\n```'
    parsed = parse_summary(fenced)
    assert parsed.evidence == "a\nb" and parsed.summary == "s"
    with pytest.raises(ValueError):
        parse_summary("I cannot help with that.")


def _recorded_searches(limit: int = 12) -> list[tuple[str, list[dict]]]:
    """(query, Serper-style organic list) from real search responses in the trajectories."""
    out = []
    with open(REFERENCE / "webdancer_sample_traj.jsonl", encoding="utf-8") as f:
        for line in f:
            for message in json.loads(line)["messages"]:
                content = message["content"]
                if message["role"] != "user" or "Google search for '" not in content:
                    continue
                for block in content.split("\n=======\n"):
                    head = re.search(r"A Google search for '(.*?)' found \d+ results:\n\n## Web Results\n", block)
                    if not head:
                        continue
                    body = block[head.end():].replace("</tool_response>", "").strip()
                    organic = []
                    for entry in re.split(r"\n\n(?=\d+\. \[)", body):
                        m = _ENTRY.match(entry.strip())
                        if m:
                            item = {"title": m["title"], "link": m["url"], "snippet": m["snippet"].strip()}
                            if m["date"]:
                                item["date"] = m["date"].strip()
                            organic.append(item)
                    if organic:
                        out.append((head.group(1), organic))
                if len(out) >= limit:
                    return out
    return out


def test_real_recorded_results_pass_through_serper_unchanged(make_live, fakeweb):
    recorded = _recorded_searches()
    assert len(recorded) >= 10
    for query, organic in recorded:
        fakeweb.canned[query] = organic
    live = make_live()
    for query, organic in recorded:
        outcome = live.search(query)
        assert outcome.ok and outcome.source == "serper"
        assert [(h.title, h.url, h.date, h.snippet) for h in outcome.value] == \
            [(o["title"], o["link"], o.get("date", ""), o["snippet"]) for o in organic][:10]
        text = format_search(query, outcome.value)
        assert text.startswith(f"A search for '{query}' found {min(len(organic), 10)} results")


def test_html_title_takes_the_first_well_formed_title():
    assert html_title("<head><title>One</title><title>Two</title></head>") == "One"
    assert html_title("<TITLE lang='en'>\n  a  <  b </Title >") == "a < b"
    assert html_title("<title>Unclosed <title>Closed</title>") == "Closed"
    assert html_title("<titles>no</titles><title>yes</title>") == "yes"
    assert html_title("<title>" + "y" * (MAX_TITLE_CHARS + 1) + "</title>") == ""  # too long to be a title
    assert html_title("<p>no title</p>") == html_title("<title>") == ""


@pytest.mark.timeout(60)  # the old `<title[^>]*>(.*?)</title>` took about 25 min on this page: it would time out
def test_many_unclosed_titles_are_read_in_linear_time(make_live, fakeweb):
    hostile = unclosed_titles_page(200_000)
    assert html_title(hostile) == TITLES_PAGE_TITLE
    assert html_title("<title>" * 200_000) == ""
    assert html_title(("<title " + "a" * 600) * 2000) == ""  # unclosed open tags too
    live = make_live()
    page = DirectReader(live.transport, live.config).read(
        f"{fakeweb.url}/hostile/titles?n=200000", deadline(30)).value
    assert page.title == TITLES_PAGE_TITLE and TITLES_PAGE_FACT in page.text
