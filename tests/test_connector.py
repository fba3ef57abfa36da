"""The Power Platform custom connector in `connector/`: Swagger 2.0 generated from the OpenAPI
document, checked by a Swagger 2.0 validator, with the x-api-key connection parameter; and a real
server answers the connector's request in the shape the connector declares."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import jsonschema
import pytest
from click.testing import CliRunner
from openapi_spec_validator import OpenAPIV2SpecValidator
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.cli import cli
from sourcegate.server.app import create_app
from sourcegate.server.connector import SECURITY_NAME, connector_files, swagger_from_openapi
from sourcegate.server.openapi import openapi_document
from sourcegate.settings import Settings

CONNECTOR = Path(__file__).resolve().parents[1] / "connector"
Q = "How often should I grease the bearings on pump P-200?"


def _load(name: str) -> dict:
    return json.loads((CONNECTOR / name).read_text(encoding="utf-8"))


def _errors(doc: dict) -> list[str]:
    return [e.message for e in OpenAPIV2SpecValidator(doc).iter_errors()]


def test_the_connector_definition_is_valid_swagger_2():
    swagger = _load("apiDefinition.swagger.json")
    assert swagger["swagger"] == "2.0"
    assert _errors(swagger) == []
    # The validator is a real check: the OpenAPI 3.0 document, or a 3.0-only keyword, fails it.
    assert _errors(openapi_document(Settings(_env_file=None), "https://x.example.org"))
    bad = copy.deepcopy(swagger)
    bad["paths"]["/v1/ask"]["post"]["responses"]["200"]["schema"]["properties"]["answer"]["nullable"] = True
    assert _errors(bad)


def _success(op: dict) -> dict:
    """An operation's success response (200, or 201 for one that stores something)."""
    return next(r for code, r in sorted(op["responses"].items()) if code.startswith("2"))


def test_the_connector_is_generated_from_the_openapi_document(tmp_path):
    """The committed folder is what `sourcegate connector` writes from the current OpenAPI
    document (regenerate it with `sourcegate connector --out connector` after changing the API)."""
    r = CliRunner().invoke(cli, ["connector", "--out", str(tmp_path / "c"), "--host", "sourcegate.example.org"],
                           env={k: None for k in ("MAX_QUERY_CHARS", "MCP_TOOL_DESCRIPTION", "MCP_API_KEY")})
    assert r.exit_code == 0, r.output
    fresh = json.loads((tmp_path / "c" / "apiDefinition.swagger.json").read_text(encoding="utf-8"))
    committed = _load("apiDefinition.swagger.json")
    assert _errors(fresh) == []

    def shape(doc: dict) -> dict:
        return {path: {method: (op["operationId"], json.dumps(op.get("parameters"), sort_keys=True), sorted(op["responses"]),
                                sorted(_success(op).get("schema", {}).get("properties", {})))
                       for method, op in item.items()} for path, item in doc["paths"].items()}

    assert shape(fresh) == shape(committed), "connector/ is stale: run `sourcegate connector --out connector`"
    assert fresh["securityDefinitions"] == committed["securityDefinitions"] and fresh["security"] == committed["security"]
    assert json.loads((tmp_path / "c" / "apiProperties.json").read_text()) == _load("apiProperties.json")
    # Every action of the OpenAPI document that answers JSON is in the connector; the event stream is not.
    doc = openapi_document(Settings(_env_file=None, mcp_api_key="k"), "https://sourcegate.example.org")
    assert set(fresh["paths"]) == {"/v1/ask", "/v1/filters", "/v1/feedback", "/v1/audit/{audit_id}"}
    assert "/v1/ask/stream" in doc["paths"]
    assert fresh["paths"]["/v1/feedback"]["post"]["operationId"] == "GiveFeedback"
    assert fresh["paths"]["/v1/filters"]["get"]["operationId"] == "ListFilters"
    assert fresh["paths"]["/v1/ask"]["post"]["operationId"] == "AskQuestion"
    assert fresh["host"] == "sourcegate.example.org" and fresh["schemes"] == ["https"]


def test_the_connection_sends_the_key_in_x_api_key():
    props = _load("apiProperties.json")["properties"]
    param = props["connectionParameters"]["api_key"]
    assert param["type"] == "securestring" and param["uiDefinition"]["constraints"]["required"] == "true"
    swagger = _load("apiDefinition.swagger.json")
    assert swagger["securityDefinitions"] == {SECURITY_NAME: {"type": "apiKey", "in": "header", "name": "x-api-key"}}
    assert swagger["security"] == [{SECURITY_NAME: []}]


def _nullable(schema):
    """A Swagger schema with `x-nullable` read as JSON Schema (null allowed), for validating replies."""
    if isinstance(schema, list):
        return [_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _nullable(v) if k in ("items", "additionalProperties") else v for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: _nullable(v) for k, v in schema["properties"].items()}
    if schema.get("x-nullable") and "type" in schema:
        out["type"] = [schema["type"], "null"]
    return out


@pytest.mark.parametrize("with_key", [True, False])
def test_a_server_answers_the_connectors_request_as_declared(tmp_path, with_key):
    """Build the request from the connector's definition alone (host, path, body parameter, the
    security definition's header), send it to a real server, and check the reply against the
    connector's response schema: Power Platform fails an action whose reply breaks its schema."""
    swagger = connector_files()["apiDefinition.swagger.json"]
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="connector-key")
    gate = make_gate(settings)
    op = swagger["paths"]["/v1/ask"]["post"]
    body_param = next(p for p in op["parameters"] if p["in"] == "body")
    header = swagger["securityDefinitions"][SECURITY_NAME]["name"]
    try:
        with running_server(create_app(settings, gate)) as base:
            url = base + swagger["basePath"].rstrip("/") + "/v1/ask"
            body = {"query": Q}
            jsonschema.validate(body, body_param["schema"])
            r = httpx.post(url, json=body, headers={header: "connector-key"} if with_key else {}, timeout=60)
            if not with_key:
                assert r.status_code == 401 and "401" in op["responses"]
                jsonschema.validate(r.json(), _nullable(op["responses"]["401"]["schema"]))
                return
            assert r.status_code == 200, r.text
            jsonschema.validate(r.json(), _nullable(op["responses"]["200"]["schema"]))
            audit = swagger["paths"]["/v1/audit/{audit_id}"]["get"]
            r2 = httpx.get(base + "/v1/audit/" + r.json()["audit_id"], headers={header: "connector-key"}, timeout=30)
            assert r2.status_code == 200
            jsonschema.validate(r2.json(), _nullable(audit["responses"]["200"]["schema"]))
            # a flow reads the integrity flag only from a header the connector declares
            declared = audit["responses"]["200"]["headers"]["x-audit-verified"]
            assert r2.headers["x-audit-verified"] in declared["enum"]
    finally:
        gate.close()


def test_the_connector_declares_every_response_of_an_audit_lookup(tmp_path):
    # 403 (lookups off), 409 (a damaged record) and 503 (busy) are sent by the server: an action
    # whose reply is not declared fails in Power Platform without its message
    audit = connector_files()["apiDefinition.swagger.json"]["paths"]["/v1/audit/{audit_id}"]["get"]
    assert {"200", "401", "403", "404", "409", "503"} <= set(audit["responses"])
    assert audit["responses"]["503"]["headers"]["Retry-After"]["type"] == "integer"
    assert audit["responses"]["200"]["headers"]["x-audit-verified"]["type"] == "string"
    committed = _load("apiDefinition.swagger.json")["paths"]["/v1/audit/{audit_id}"]["get"]
    assert committed["responses"] == audit["responses"]
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="k")
    gate = make_gate(settings)
    try:  # each is sent for real
        with running_server(create_app(settings, gate, audit_lookup=False)) as base:
            r = httpx.get(base + "/v1/audit/" + "a" * 32, headers={"x-api-key": "k"}, timeout=30)
            assert r.status_code == 403
            jsonschema.validate(r.json(), _nullable(audit["responses"]["403"]["schema"]))
    finally:
        gate.close()


def test_swagger_from_openapi_keeps_nullable_as_x_nullable():
    doc = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h.example/api"}],
           "paths": {"/x/{id}": {"get": {"operationId": "GetX", "parameters": [
               {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
               "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                   "type": "object", "properties": {"a": {"type": "string", "nullable": True}}}}}}}}}}}
    out = swagger_from_openapi(doc)
    assert _errors(out) == []
    assert out["host"] == "h.example" and out["basePath"] == "/api"
    op = out["paths"]["/x/{id}"]["get"]
    assert op["parameters"] == [{"name": "id", "in": "path", "required": True, "type": "string"}]
    assert op["responses"]["200"]["schema"]["properties"]["a"] == {"type": "string", "x-nullable": True}
