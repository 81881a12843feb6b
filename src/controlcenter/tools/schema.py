"""Tool input schemas shaped into the form both provider APIs accept.

Anthropic refuses a whole request when one tool's `input_schema` has `oneOf`, `anyOf` or
`allOf` at its top level; OpenAI refuses `oneOf`, `anyOf`, `allOf`, `enum` and `not` there,
and any schema whose type is not `object` (docs/providers.md lists the rules and their
sources). Tool sources publish such schemas all the same (an MCP server's union type, a CRM
tool's "e-mail or phone"), so the offered schema is rewritten: the properties of every branch
are merged into one object schema, the rule the combinator expressed is said in words in the
schema's description, and the arguments are still validated against the schema as published
before the tool runs (router._Entry).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import Draft202012Validator

# Keywords at the top level of an offered schema that a provider refuses.
TOP_LEVEL_REFUSED = ("oneOf", "anyOf", "allOf", "enum", "const", "not")
_RULE = {"anyOf": "at least one of", "oneOf": "exactly one of", "allOf": "all of"}
_MAX_RULE_CHARS = 2000  # a rule spelled out as JSON stays readable, not a second schema

OPEN_OBJECT: dict[str, Any] = {"type": "object"}


def offered_schema(published: Any) -> dict[str, Any] | None:
    """The schema to offer a provider for `published`, or None when no JSON object can ever
    satisfy it (a tool whose arguments must be a string, say, cannot be called at all)."""
    if published is True or published == {}:
        return dict(OPEN_OBJECT)
    if not isinstance(published, dict):
        return None
    try:
        Draft202012Validator.check_schema(published)
    except SchemaError:
        # Both APIs refuse an invalid schema; the tool judges its own input instead.
        return _with_rules(dict(OPEN_OBJECT), published.get("description"), [])
    kind = published.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        return None
    shaped = {k: v for k, v in published.items() if k not in TOP_LEVEL_REFUSED}
    shaped["type"] = "object"
    properties = dict(shaped.get("properties") or {})
    required = list(shaped.get("required") or [])
    rules: list[str] = []
    for keyword in ("allOf", "anyOf", "oneOf"):
        branches = published.get(keyword)
        if isinstance(branches, list):
            _merge_branches(keyword, branches, properties, required)
            rules.append(combinator_rule(keyword, branches))
    if "enum" in published:
        rules.append("The arguments must be one of: " + _json(published["enum"]))
    if "const" in published:
        rules.append("The arguments must be exactly: " + _json(published["const"]))
    if "not" in published:
        rules.append("The arguments must not match this schema: " + _json(published["not"]))
    if properties:
        shaped["properties"] = properties
    if required:
        shaped["required"] = required
    return _with_rules(shaped, published.get("description"), rules)


def offends(schema: Any) -> str | None:
    """Why an offered schema breaks a provider rule, or None: for the catalogue test and the
    CLI, the same rules the fakes enforce."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "not an object schema"
    bad = [k for k in TOP_LEVEL_REFUSED if k in schema]
    if bad:
        return f"{', '.join(bad)} at the top level"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"invalid JSON Schema: {exc.message}"
    return None


def _merge_branches(
    keyword: str, branches: Sequence[Any], properties: dict[str, Any], required: list[str]
) -> None:
    """Add the branches' properties; keep as required what every valid input must have."""
    seen: dict[str, list[Any]] = {}
    for branch in branches:
        if isinstance(branch, dict) and isinstance(branch.get("properties"), dict):
            for name, schema in branch["properties"].items():
                variants = seen.setdefault(name, [])
                if schema not in variants:
                    variants.append(schema)
    for name, variants in seen.items():
        if name not in properties:
            properties[name] = variants[0] if len(variants) == 1 else {"anyOf": variants}
    lists = [set(b.get("required") or []) if isinstance(b, dict) else set() for b in branches]
    if not lists:
        return
    must = set.union(*lists) if keyword == "allOf" else set.intersection(*lists)
    required.extend(sorted(name for name in must if name not in required))


def combinator_rule(keyword: str, branches: Sequence[Any]) -> str:
    """The rule of a combinator in words, for the model (also in argument errors)."""
    if branches and all(isinstance(b, dict) and set(b) == {"required"} for b in branches):
        options = [" and ".join(b["required"]) for b in branches]
        return f"Give {_RULE[keyword]}: " + "; ".join(options) + "."
    return f"Must match {_RULE[keyword]} these schemas: " + _json(branches)


def _with_rules(schema: dict[str, Any], description: Any, rules: list[str]) -> dict[str, Any]:
    parts = [description] if isinstance(description, str) and description.strip() else []
    parts.extend(rules)
    if parts:
        schema["description"] = " ".join(parts)
    else:
        schema.pop("description", None)
    return schema


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _MAX_RULE_CHARS else text[: _MAX_RULE_CHARS - 1] + "…"
