#!/usr/bin/python3
"""Checks HTTP responses the gateway gave against docs/openapi.yaml.

The C++ contract tests, run with TALLY_RECORD_RESPONSES=<file>, append one
JSON line per response they receive:

    {"method": "GET", "target": "/v1/accounts/acct-1?consistency=strong",
     "status": 200, "content_type": "application/json", "body": "<raw text>",
     "headers": {"x-request-id": "...", ...}}

Each is matched to an operation (the target's path, its segments
percent-decoded, against the file's path templates; a literal segment wins
over a parameter), then to the response of its status (else "default").
A status the operation does not list is a failure; so are a missing
required header, a header value its schema refuses, an undocumented
content type, and a JSON body its schema refuses. Other
bodies are checked for their content type only. A request no operation
describes (an unknown route, a method a path does not have) must have been
refused with the error body and 400, 401, 403 or 404.

    validate_responses.py --responses /tmp/responses.jsonl [--spec docs/openapi.yaml]

Prints every failure and a summary (responses per operation, operations
never exercised); exits 1 when something failed.
"""
import argparse
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spec as openapi  # noqa: E402

UNKNOWN_ROUTE = "(no operation)"
REFUSALS = {400, 401, 403, 404}


class Spec:
    """The file's operations, path matching, and cached schema validators."""

    def __init__(self, doc):
        self.doc = doc
        self.templates = []  # (segments, rest, path): rest when the last parameter takes the remaining segments
        for path, item in doc.get("paths", {}).items():
            segments = [s for s in path.split("/") if s]
            self.templates.append((segments, self._takes_rest(item, segments), path))
        self._validators = {}

    def _takes_rest(self, item, segments):
        """Whether the path's last segment is a parameter marked `x-tally-rest`."""
        if not segments or not segments[-1].startswith("{"):
            return False
        params = item.get("parameters", []) + [p for m in openapi.METHODS for p in item.get(m, {}).get("parameters", [])]
        params = [openapi.deref(self.doc, p) for p in params]
        return any(p.get("name") == segments[-1][1:-1] and p.get("x-tally-rest") for p in params)

    def match(self, method, target):
        """(path template, operation) of a request; (None, None) when no operation describes it."""
        raw = urllib.parse.urlsplit(target).path
        segments = [urllib.parse.unquote(s, errors="replace") for s in raw.split("/") if s]
        best, best_literals = None, -1
        for template, rest, path in self.templates:
            if not (len(segments) == len(template) or (rest and len(segments) >= len(template))):
                continue
            literals = 0
            for want, got in zip(template, segments):
                if want.startswith("{") and want.endswith("}"):
                    continue
                if want != got:
                    break
                literals += 1
            else:
                if literals > best_literals:
                    best, best_literals = path, literals
        operation = self.doc["paths"][best].get(method.lower()) if best else None
        return (best, operation) if operation else (None, None)

    def validate(self, schema, instance):
        """Every error of `instance` against `schema`, ordered by where it is."""
        key = id(schema)
        if key not in self._validators:
            self._validators[key] = openapi.validator(self.doc, schema)
        return sorted(self._validators[key].iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))


def media_type(content_type):
    return (content_type or "").split(";")[0].strip().lower()


def is_json(media):
    return media == "application/json" or media.endswith("+json")


def documented_media(content, media):
    """The key of `content` that covers `media` (exact, "type/*" or "*/*"), or None."""
    for key in (media, media.split("/")[0] + "/*", "*/*"):
        if key in content:
            return key
    return None


def body_problems(spec, rec, content):
    """What is wrong with a response's content type and body against the response's `content`."""
    media, body = media_type(rec.get("content_type")), rec.get("body") or ""
    if not content:
        return [f"undocumented body ({media or 'no content type'})"] if body else []
    key = documented_media(content, media)
    if key is None:
        return [f"content type {rec.get('content_type')!r} not documented (documented: {', '.join(content)})"]
    if not is_json(media):
        return []
    try:
        instance = json.loads(body)
    except ValueError as e:
        return [f"body is not JSON: {e}"]
    schema = content[key].get("schema")
    if schema is None:
        return []
    return [f"at /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in spec.validate(schema, instance)]


def header_problems(spec, rec, headers):
    """Required headers that are missing, and header values their schema refuses."""
    got = {k.lower(): v for k, v in (rec.get("headers") or {}).items()}
    problems = []
    for name, header in (headers or {}).items():
        header = openapi.deref(spec.doc, header)
        value = got.get(name.lower())
        if value is None:
            if header.get("required"):
                problems.append(f"header {name} missing")
            continue
        schema = header.get("schema")
        if schema is None:
            continue
        if schema.get("type") == "integer" and value.strip().lstrip("-").isdigit():
            value = int(value)
        for e in spec.validate(schema, value):
            problems.append(f"header {name}: {e.message}")
    return problems


def check(spec, rec):
    """(operation name, problems) of one recorded response."""
    method, status = rec["method"].upper(), int(rec["status"])
    path, operation = spec.match(method, rec["target"])
    if operation is None:
        if status not in REFUSALS:
            return UNKNOWN_ROUTE, [f"no operation describes {method} {urllib.parse.urlsplit(rec['target']).path}, "
                                   f"yet the gateway answered {status}"]
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        return UNKNOWN_ROUTE, body_problems(spec, rec, error)
    name = f"{method} {path}"
    responses = operation.get("responses", {})
    response = responses.get(str(status)) or responses.get("default")
    if response is None:
        return name, [f"status {status} not documented (documented: {', '.join(responses)})"]
    response = openapi.deref(spec.doc, response)
    return name, header_problems(spec, rec, response.get("headers")) + body_problems(spec, rec, response.get("content"))


def read_records(path):
    """(line number, recorded response or None when the line is not one)."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = None
                ok = isinstance(rec, dict) and {"method", "target", "status"} <= rec.keys()
                yield number, rec if ok else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=openapi.SPEC, help="the OpenAPI file (default: %(default)s)")
    parser.add_argument("--responses", default=os.environ.get("TALLY_RECORD_RESPONSES"),
                        help="the recorded responses, JSON lines (default: $TALLY_RECORD_RESPONSES)")
    args = parser.parse_args(argv)
    if not args.responses:
        parser.error("--responses is required (or set TALLY_RECORD_RESPONSES)")
    spec = Spec(openapi.load(args.spec))
    checked = {f"{m} {p}": 0 for m, p, _ in openapi.operations(spec.doc)}
    checked[UNKNOWN_ROUTE] = 0
    failures = 0
    for number, rec in read_records(args.responses):
        if rec is None:
            failures += 1
            print(f"FAIL line {number}: not a recorded response (JSON with method, target, status)")
            continue
        name, problems = check(spec, rec)
        checked[name] += 1
        if problems:
            failures += 1
            print(f"FAIL line {number}: {rec['method']} {rec['target']} -> {rec['status']}")
            for p in problems:
                print(f"  {p}")
            print(f"  body: {(rec.get('body') or '')[:200]!r}")
    total = sum(checked.values())
    print(f"\n{total} responses checked, {failures} failed")
    for name, n in checked.items():
        if n:
            print(f"  {n:6d}  {name}")
    never = [name for name, n in checked.items() if n == 0 and name != UNKNOWN_ROUTE]
    print(f"operations never exercised ({len(never)}):")
    for name in never:
        print(f"          {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
