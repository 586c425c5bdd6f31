"""Reading the models' replies: fenced blocks out of the text, then checked against what each agent must return.

Every failure raises `ReplyError` with a message written for the model: the Team quotes it back in the re-ask, so
it says what was wrong and what to send instead. Parsers are lenient where leniency is safe (extra JSON fields,
an unfenced JSON object, `py`/`python3` tags, list items that are objects) and strict where a wrong guess would
cost a review (no code block, no `class ModelNew`, a method outside the allowed set).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from kernelskill.agents.candidate_blocks import MODEL_NEW, choose, is_complete
from kernelskill.agents.context import Diagnosis, Plan, PlanContext

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[^\s`]*)[^`\n]*$")
_CODE_TAGS = {"python", "py", "python3"}


class ReplyError(ValueError):
    """A reply that cannot be used; the message is addressed to the model that wrote it."""


@dataclass(frozen=True)
class Block:
    tag: str  # lower-cased info string's first word ("" when untagged)
    body: str
    closed: bool  # False when the reply ended inside the block (cut off at the token limit?)


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown reply, in order. A closing fence uses the same character, at least as
    long as the opening one, so a ``` inside a ```` block does not end it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match["fence"]
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        blocks.append(Block(tag=match["tag"].lower(), body="\n".join(body), closed=i < len(lines)))
        i += 1
    return blocks


def extract_json(text: str) -> dict:
    """The JSON object of a reply: the last ```json block; else the whole reply when it is one JSON object; else
    the last untagged block holding a JSON object."""
    blocks = fenced_blocks(text)
    tagged = [b for b in blocks if b.tag == "json"]
    if tagged:
        return _json_object(tagged[-1].body, "the ```json block")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _json_object(stripped, "the reply")
    for block in reversed([b for b in blocks if b.tag == ""]):
        try:
            return _json_object(block.body, "the block")
        except ReplyError:
            continue
    raise ReplyError(
        "no ```json block found; reply with exactly one fenced ```json block holding a single JSON object"
    )


def _json_object(body: str, where: str) -> dict:
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ReplyError(
            f"{where} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); send one JSON object "
            "with double-quoted keys and strings, no comments and no trailing commas"
        ) from None
    if not isinstance(value, dict):
        raise ReplyError(f"{where} holds a JSON {type(value).__name__}, not an object; send one JSON object {{...}}")
    return value


def extract_code(text: str) -> str:
    """The candidate of a reply: among its ```python (or ```py, ```python3) blocks, the complete one, as
    candidate_blocks.py decides (a file restated as a stub, code split over blocks); a reply with no fence at all
    when it is a whole file. The source is not required to parse: a syntax error is the candidate's compile
    failure, which the Reviewer reports and the repair chain fixes."""
    blocks = fenced_blocks(text)
    code = [b for b in blocks if b.tag in _CODE_TAGS]
    code = code or [b for b in blocks if b.tag == "" and MODEL_NEW.search(b.body)]  # an untagged fence
    if not code:
        if not blocks and is_complete(text):  # the bare file, no fence
            return text.strip("\n") + "\n"
        raise ReplyError(
            "no ```python block found; reply with exactly one fenced ```python block holding the complete "
            "candidate file (imports, kernels and `class ModelNew(nn.Module)`)"
        )
    if not any(MODEL_NEW.search(b.body) for b in code):
        raise ReplyError(
            "the ```python block does not define `class ModelNew`; send the complete candidate file, not a "
            "fragment or a diff: imports, kernels and `class ModelNew(nn.Module)` with Model's __init__ and "
            "forward signatures"
        )
    chosen = choose([b.body for b in code if b.closed])
    if chosen is None:  # every block that defines ModelNew was cut off
        raise ReplyError(
            "the ```python block is not closed (the reply was probably cut off at the token limit); send the "
            "complete file again in one ```python block and keep the explanation short"
        )
    return chosen.strip("\n") + "\n"


# structured replies -----------------------------------------------------------------------------------------------


def _text(item: object) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in item.items())
    if isinstance(item, list):
        return ", ".join(_text(v) for v in item)
    return json.dumps(item)


def _coerce_texts(data: dict, fields: tuple[str, ...]) -> dict:
    """Models often answer a text-or-list field with objects ({"field": ..., "direction": ...}) or numbers; turn
    those items into text instead of re-asking for a cosmetic difference."""
    out = dict(data)
    for name in fields:
        value = out.get(name)
        if isinstance(value, list):
            out[name] = [_text(v) for v in value]
        elif isinstance(value, dict):
            out[name] = {str(k): _text(v) for k, v in value.items()}
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = str(value)
    return out


def _validate(model: type[BaseModel], data: dict, what: str) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        missing = sorted({str(e["loc"][0]) for e in exc.errors() if e["type"] == "missing" and e["loc"]})
        invalid: dict[str, str] = {}
        for e in exc.errors():
            name = str(e["loc"][0]) if e["loc"] else ""
            if e["type"] != "missing" and name and name not in missing:
                invalid.setdefault(name, e["msg"])
        parts = []
        if missing:
            parts.append("missing field(s) " + ", ".join(f"`{m}`" for m in missing))
        if invalid:
            parts.append("invalid field(s) " + ", ".join(f"`{k}` ({v.lower()})" for k, v in invalid.items()))
        raise ReplyError(f"the {what} JSON has {'; '.join(parts) or 'invalid content'}") from None


def parse_plan(text: str, ctx: PlanContext) -> Plan:
    """The Planner's reply, checked against the context: an allowed method when long-term memory is on, and a
    `what_differs` when it repeats a method already tried on this base."""
    data = _coerce_texts(extract_json(text), ("plan", "evidence", "expected_metric_change", "bottleneck"))
    plan = _validate(Plan, data, "plan")
    assert isinstance(plan, Plan)
    method = plan.method.strip()
    if not method:
        raise ReplyError("`method` is empty; name the one optimization method this plan applies")
    if ctx.methods:
        ids = [m.id for m in ctx.methods]
        match = next((i for i in ids if i == method.lower().replace("-", "_").replace(" ", "_")), None)
        if match is None:
            raise ReplyError(
                f"`method` is {method!r}, which is not one of the allowed methods; choose exactly one of these ids: "
                + ", ".join(ids)
            )
        method = match
    if ctx.attempts:
        tried = {a.method for a in ctx.attempts}
        if method in tried and not (plan.what_differs or "").strip():
            labels = ", ".join(a.label for a in ctx.attempts if a.method == method)
            raise ReplyError(
                f"method `{method}` was already tried on this base kernel ({labels}); either choose another method "
                "or add a non-empty `what_differs` string saying concretely how this attempt differs from the "
                "earlier one(s) and why it should now succeed"
            )
    return plan.model_copy(update={"method": method}) if method != plan.method else plan


def parse_diagnosis(text: str) -> Diagnosis:
    data = _coerce_texts(extract_json(text), ("critical_issue", "root_cause", "evidence", "fix"))
    diagnosis = _validate(Diagnosis, data, "diagnosis")
    assert isinstance(diagnosis, Diagnosis)
    return diagnosis


def parse_features(text: str, names: list[str]) -> dict[str, object]:
    """The Feature Extractor's answers: {"features": {name: value}}, restricted to the asked `names` (raw values;
    the memory layer checks them against each feature's type). An answer holding none of them is an error."""
    data = extract_json(text)
    features = data.get("features")
    if features is None and any(n in data for n in names):
        features = data  # the model left out the "features" wrapper
    if not isinstance(features, dict):
        raise ReplyError('the JSON has no "features" object; send {"features": {"<feature id>": <value>, ...}}')
    answers = {name: features[name] for name in names if name in features}
    if not answers:
        raise ReplyError("the \"features\" object answers none of the asked features; give a value for each of: "
                         + ", ".join(names))
    return answers
