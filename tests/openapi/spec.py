"""What the OpenAPI scripts of this folder share: loading docs/openapi.yaml,
its operations, local $refs, and JSON Schema validators whose
"#/components/..." references resolve.

A schema is validated inside a root document that carries the spec's
`components`, so every "#/components/schemas/X" resolves without a
resolver or registry: the same code runs on Debian 12's jsonschema 4.10
and on newer releases."""
import os

import yaml
from jsonschema import Draft202012Validator

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC = os.path.join(ROOT, "docs", "openapi.yaml")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def load(path=SPEC):
    """The spec as Python data."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def operations(spec):
    """(METHOD, path, operation) for every operation, in file order."""
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def pointer(spec, ref):
    """The object a local reference ("#/a/b") names; KeyError when none."""
    if not ref.startswith("#/"):
        raise KeyError(f"not a local reference: {ref}")
    node = spec
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"{ref}: no {part!r}")
    return node


def deref(spec, obj):
    """A response, parameter, header or request body with its $ref followed."""
    while isinstance(obj, dict) and "$ref" in obj:
        obj = pointer(spec, obj["$ref"])
    return obj


def validator(spec, schema):
    """A Draft 2020-12 validator of `schema` in which the spec's components resolve."""
    root = dict(schema)
    root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    root["components"] = spec.get("components", {})
    return Draft202012Validator(root)
