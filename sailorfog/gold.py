"""Gold trajectories for research tasks: an oracle that uses only the question and what the tools show.

It searches with the question's descriptions (a type, a predicate, an event), never with a
name the question hides; it visits only entities the question describes, each with a goal
saying what to check there; once a page is read, it follows the names that page shows. Its
number of tool calls is the task's measured effort. A task it cannot solve is dropped.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from envs.tasks import task_from_dict
from envs.trajectory import trajectory_record
from sailorfog.oracle import OracleResult, _Episode, _Stop
from sailorfog.prose import TARGET, _order
from sailorfog.statements import Statement
from sailorfog.text import article, display_title, mask, numbers
from wiki_sim.records import title_to_url

MAX_QUERIES = 3


def _goal(label: str, statements: Sequence[Statement], types: Mapping[str, str]) -> str:
    """What to check on an entity's page, in the question's own terms."""
    kind = types[label]
    wants = [f"is it {article(kind)} {kind}"]
    for s in statements:
        if s.subject == label and s.kind == "date":
            wants.append(f"{'when was it ' + s.predicate if s.predicate else 'what happened'} (expected {s.value})")
        elif s.kind == "relation" and label in s.labels:
            other = types[s.object if s.subject == label else s.subject]
            wants.append(f"which {other} is related to it ({s.predicate})")
    return "; ".join(wants)[:300]


def description_queries(label: str, statements: Sequence[Statement], types: Mapping[str, str]) -> list[str]:
    """Searches an agent could write from the question for the entity ``label``."""
    kind = types[label]
    queries = []
    dated = [s for s in statements if s.subject == label and s.kind == "date" and s.predicate]
    if dated:
        queries.append(f"{kind} {dated[0].predicate} {dated[0].value.replace('the ', '')}")
    for s in statements:
        if s.kind == "relation" and label in s.labels:
            other = types[s.object if s.subject == label else s.subject]
            pred = "" if s.predicate == "mentions" else s.predicate
            queries.append(f"{kind} {pred} {other}".replace("  ", " "))
    queries.append(kind)
    return list(dict.fromkeys(q.strip() for q in queries if q.strip()))[:MAX_QUERIES]


def _shows(s: Statement, text: str, titles: Mapping[str, str], names: Callable[[str], list[str]]) -> bool:
    """Whether ``text`` (what a visit returned) holds the statement's evidence."""
    if s.kind == "type":
        return all(w.lower() in text.lower() for w in s.value.split())
    if s.kind == "date":
        check = s.checks[0]
        return any(check["lo"] <= v <= check["hi"] for v in numbers(text))
    if s.kind == "relation":
        other = titles[s.object if s.evidence.get("title") == titles[s.subject] else s.subject]
        return mask(text, [other, display_title(other), *names(other)], "\x00") != text
    return True


def play_gold(env: Any, task: Mapping[str, Any], statements: Sequence[Statement], titles: Mapping[str, str],
              types: Mapping[str, str], names: Callable[[str], list[str]]) -> OracleResult:
    """Play the oracle on ``task``; see the module docstring."""
    ep = _Episode(env, task)
    texts: dict[str, str] = {}
    order = _order(statements)
    try:
        start = None
        for label in order:
            url = title_to_url(titles[label])
            for q in description_queries(label, statements, types):
                if url in ep.search([q], f"Search for the {types[label]} by its description."):
                    start = label
                    break
            if start is not None:
                break
        if start is None:
            return OracleResult(False, "no description search found an entity of the chain", tool_calls=ep.calls)
        texts[start] = ep.visit(title_to_url(titles[start]), _goal(start, statements, types),
                                f"A hit may be the {types[start]}; read it to check the clues.")
        adjacent = {lab: set() for lab in titles}
        for s in statements:
            if s.kind == "relation":
                adjacent[s.subject].add(s.object)
                adjacent[s.object].add(s.subject)
        while TARGET not in texts:
            frontier = sorted({n for v in texts for n in adjacent[v]} - set(texts), key=order.index)
            if not frontier:
                return OracleResult(False, "the chain is not connected", tool_calls=ep.calls)
            label = frontier[0]
            title = titles[label]
            named = [v for v in texts if mask(texts[v], [title, display_title(title), *names(title)], "\x00")
                     != texts[v]]
            if not named:
                via = next(v for v in texts if label in adjacent[v])
                query = f"{display_title(titles[via])} {types[label]}"
                if title_to_url(title) not in ep.search([query], f"Find the {types[label]} related to "
                                                                   f"{display_title(titles[via])}."):
                    return OracleResult(False, f"no search reached the {types[label]}", tool_calls=ep.calls)
                thought = f"A hit is a {types[label]} tied to {display_title(titles[via])}; check it."
            else:
                thought = (f"{display_title(titles[named[0]])} names {display_title(title)}, "
                           f"a possible {types[label]}; check it.")
                if display_title(title) != title:  # "Classical period" shown: its page's address is not
                    query = f"{display_title(title)} {types[label]}"  # (music); a search shows it
                    if title_to_url(title) not in ep.search([query], thought.replace("check it", "find its page")):
                        return OracleResult(False, f"no search reached the {types[label]}", tool_calls=ep.calls)
                    thought = f"A hit is {display_title(title)}'s page; check it."
            texts[label] = ep.visit(title_to_url(title), _goal(label, statements, types), thought)
        for s in statements:
            holder = next((lab for lab, t in titles.items() if t == s.evidence.get("title")), s.subject)
            if holder in texts and not _shows(s, texts[holder], titles, names):
                texts[holder] += " " + ep.visit(title_to_url(titles[holder]), s.evidence.get("sentence", "")[:200],
                                                f"The excerpt missed clue {s.id}; read that part again.")
                if not _shows(s, texts[holder], titles, names):
                    return OracleResult(False, f"no evidence reached for statement {s.id}", tool_calls=ep.calls)
    except _Stop as stop:
        return OracleResult(False, str(stop), tool_calls=ep.calls)
    answer = display_title(titles[TARGET])
    ep.answer(answer, f"Every clue checks out on the pages read; the {types[TARGET]} is {answer}.")
    if not ep.info.get("is_correct"):
        return OracleResult(False, "the environment judged the oracle's answer wrong", tool_calls=ep.calls)
    record = trajectory_record(task_from_dict(dict(task)), ep.env.unwrapped.messages(), ep.reward, ep.info, "oracle")
    return OracleResult(True, "", record, ep.calls)
