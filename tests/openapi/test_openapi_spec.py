"""docs/openapi.yaml is a sound OpenAPI 3.1 document: it parses, every $ref
resolves, every schema is a valid JSON Schema 2020-12 schema whose
examples it accepts, and every operation has a success and documents the
error statuses that apply to it (rules below, from the gateway's
request path in docs/gateway.md).

    python3 tests/openapi/test_openapi_spec.py [-v]
"""
import os
import sys
import unittest

from jsonschema import Draft202012Validator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spec as openapi  # noqa: E402

# Routes that call no upstream whose silence would be a 503: they report
# an unreachable shard or service in their 200 body instead.
NO_UPSTREAM_FAILURE = {("GET", "/v1/admin/shards"), ("GET", "/v1/admin/health"), ("GET", "/v1/admin/clusters")}
ROLES = {"none": [], "app": [{"bearerAuth": ["app"]}, {"bearerAuth": ["operator"]}],
         "operator": [{"bearerAuth": ["operator"]}]}


def walk(node, where="#"):
    """Every (JSON pointer, dict) in the document, depth first."""
    if isinstance(node, dict):
        yield where, node
        for k, v in node.items():
            yield from walk(v, f"{where}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{where}/{i}")


def schemas(doc):
    """(pointer, schema) of every component schema and every `schema` of a parameter, header or media type."""
    for name, s in doc["components"]["schemas"].items():
        yield f"#/components/schemas/{name}", s
    for where, node in walk(doc["paths"], "#/paths"):
        if isinstance(node.get("schema"), dict):
            yield where + "/schema", node["schema"]
    for kind in ("parameters", "headers", "requestBodies", "responses"):
        for where, node in walk(doc["components"].get(kind, {}), f"#/components/{kind}"):
            if isinstance(node.get("schema"), dict):
                yield where + "/schema", node["schema"]


def refs_of(doc, schema):
    """The chain of $refs a schema goes through."""
    chain = []
    while "$ref" in schema:
        chain.append(schema["$ref"])
        schema = openapi.pointer(doc, schema["$ref"])
    return chain


def is_websocket(op):
    return "101" in op["responses"]


def required_statuses(doc, method, path, op):
    """The error statuses the operation must document, and why."""
    security = op.get("security", doc.get("security", []))
    params = [openapi.deref(doc, p) for p in doc["paths"][path].get("parameters", []) + op.get("parameters", [])]
    need = {}
    if security:
        need["400"] = "every /v1/ route checks its query parameters"
        need["401"] = "it needs a key"
        if not is_websocket(op):
            need["429"] = "its key's requests are rate limited"
            if (method, path) not in NO_UPSTREAM_FAILURE:
                need["503"] = "it calls the orchestrator or a shard"
    if security == ROLES["operator"]:
        need["403"] = "an app key may not use it"
    if any(p["in"] == "path" for p in params):
        need["404"] = "it names an object (or file) that may not exist"
    if "requestBody" in op:
        need["413"] = "it takes a body, refused over 64 KiB"
    return need


class SpecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = openapi.load()
        cls.ops = list(openapi.operations(cls.doc))

    def test_is_openapi_3_1_with_paths(self):
        self.assertRegex(str(self.doc.get("openapi")), r"^3\.1\.\d+$")
        self.assertTrue(self.doc["info"]["title"] and self.doc["info"]["version"])
        self.assertGreater(len(self.ops), 0)
        self.assertEqual(self.doc.get("jsonSchemaDialect", "https://spec.openapis.org/oas/3.1/dialect/base"),
                         "https://spec.openapis.org/oas/3.1/dialect/base")

    def test_every_ref_resolves(self):
        for where, node in walk(self.doc):
            ref = node.get("$ref")
            if isinstance(ref, str):
                with self.subTest(where=where, ref=ref):
                    openapi.pointer(self.doc, ref)

    def test_every_schema_is_valid_json_schema(self):
        for where, schema in schemas(self.doc):
            with self.subTest(where=where):
                Draft202012Validator.check_schema(schema)

    def test_every_schema_example_validates(self):
        seen = 0
        for where, schema in schemas(self.doc):
            for sub_where, sub in walk(schema, where):
                if not isinstance(sub.get("examples"), list) or sub_where.endswith("/properties"):
                    continue
                check = openapi.validator(self.doc, sub)
                for i, example in enumerate(sub["examples"]):
                    seen += 1
                    with self.subTest(where=f"{sub_where}/examples/{i}"):
                        errors = [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in check.iter_errors(example)]
                        self.assertEqual(errors, [])
        self.assertGreater(seen, 0)

    def test_operation_ids_are_unique(self):
        ids = [op.get("operationId") for _, _, op in self.ops]
        self.assertNotIn(None, ids)
        self.assertEqual(len(ids), len(set(ids)))

    def test_every_operation_succeeds_somehow(self):
        for method, path, op in self.ops:
            with self.subTest(op=f"{method} {path}"):
                codes = set(op["responses"])
                self.assertTrue(any(c.startswith("2") for c in codes) or (is_websocket(op) and codes & {"101"}),
                                "no 2xx response (101 only for the WebSocket upgrade)")

    def test_every_operation_documents_the_errors_that_apply(self):
        for method, path, op in self.ops:
            for status, why in required_statuses(self.doc, method, path, op).items():
                with self.subTest(op=f"{method} {path}", status=status):
                    self.assertIn(status, op["responses"], f"{status} applies: {why}")

    def test_roles_and_security_agree(self):
        for method, path, op in self.ops:
            with self.subTest(op=f"{method} {path}"):
                role = op.get("x-tally-role")
                self.assertIn(role, ROLES)
                security = op.get("security", self.doc.get("security", []))
                if is_websocket(op):  # the key may also come in ?api_key=
                    security = [s for s in security if "apiKeyQuery" not in s]
                self.assertEqual(security, ROLES[role])
                if role == "operator":
                    self.assertTrue(path.startswith("/v1/admin/"))

    def test_every_json_response_has_a_schema_and_errors_the_error_body(self):
        for method, path, op in self.ops:
            for status, response in op["responses"].items():
                response = openapi.deref(self.doc, response)
                for media, content in response.get("content", {}).items():
                    with self.subTest(op=f"{method} {path}", status=status, media=media):
                        self.assertIn("schema", content)
                        if media == "application/json" and int(status) >= 400:
                            self.assertIn("#/components/schemas/Error", refs_of(self.doc, content["schema"]))


if __name__ == "__main__":
    unittest.main()
