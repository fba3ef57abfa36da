"""A Power Platform custom connector, generated from the OpenAPI document of the REST API.

Power Platform custom connectors (Power Automate, Power Apps, Copilot Studio actions) import
OpenAPI 2.0 (Swagger). `swagger_from_openapi` converts the server's OpenAPI 3.0 document
(`openapi.openapi_document`), which is the single source of the API's shape; `write_connector`
writes the connector folder as `paconn` and the connector repositories lay it out:

- `apiDefinition.swagger.json`: the Swagger 2.0 definition, with the `x-api-key` header as an
  API-key security definition;
- `apiProperties.json`: the connection parameter `api_key` (a secure string the maker types when
  creating the connection, sent as `x-api-key`), the brand colour and capabilities.

The streamed action (`text/event-stream`) is left out: connectors cannot read an event stream.

`sourcegate connector --host agent.example.org` writes the folder for a deployment.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..settings import Settings
from .openapi import API_KEY_HEADER, openapi_document

DEFAULT_HOST = "sourcegate.example.org"
SECURITY_NAME = "API Key"
# Schema keywords OpenAPI 3.0 has and Swagger 2.0 does not; `nullable` becomes `x-nullable`,
# which Power Platform reads.
_DROPPED = {"nullable", "oneOf", "anyOf", "not", "deprecated", "writeOnly", "externalDocs"}


def _schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as a Swagger 2.0 schema."""
    if isinstance(node, list):
        return [_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "nullable":
            if value:
                out["x-nullable"] = True
            continue
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "allOf"):
            out[key] = _schema(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _parameter(p: dict[str, Any]) -> dict[str, Any]:
    """A path, query or header parameter: Swagger 2.0 puts the schema's type on the parameter."""
    out = {k: copy.deepcopy(v) for k, v in p.items() if k != "schema"}
    schema = p.get("schema") or {"type": "string"}
    for k in ("type", "format", "enum", "maxLength", "minLength", "pattern", "default"):
        if k in schema:
            out[k] = copy.deepcopy(schema[k])
    return out


def _response(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": r.get("description", "")}
    content = r.get("content") or {}
    media = content.get("application/json")
    if media and "schema" in media:
        out["schema"] = _schema(media["schema"])
    if r.get("headers"):
        out["headers"] = {name: {**({"description": h["description"]} if "description" in h else {}),
                                 **{k: v for k, v in (h.get("schema") or {"type": "string"}).items()
                                    if k in ("type", "format", "enum")}}
                          for name, h in r["headers"].items()}
    return out


def _operation(op: dict[str, Any]) -> dict[str, Any] | None:
    """An operation in Swagger 2.0, or None when it answers only with something a connector cannot
    read (an event stream)."""
    ok = (op.get("responses") or {}).get("200") or {}
    if ok.get("content") and "application/json" not in ok["content"]:
        return None
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in op.items()
                           if k not in ("requestBody", "responses", "parameters", "servers", "callbacks")}
    params = [_parameter(p) for p in op.get("parameters") or []]
    body = op.get("requestBody")
    if body:
        media = (body.get("content") or {}).get("application/json") or {}
        params.append({"name": "body", "in": "body", "required": bool(body.get("required")),
                       "schema": _schema(media.get("schema") or {"type": "object"})})
        out["consumes"] = ["application/json"]
    if params:
        out["parameters"] = params
    out["produces"] = ["application/json"]
    out["responses"] = {code: _response(r) for code, r in (op.get("responses") or {}).items()}
    return out


def swagger_from_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """The Swagger 2.0 definition of an OpenAPI 3.0 document of inline schemas (no `$ref`), with
    the `x-api-key` header as its API-key security definition."""
    url = urlsplit(((doc.get("servers") or [{}])[0]).get("url") or f"https://{DEFAULT_HOST}")
    paths: dict[str, Any] = {}
    for path, item in (doc.get("paths") or {}).items():
        ops = {method: converted for method, op in item.items()
               if method in ("get", "post", "put", "patch", "delete") and (converted := _operation(op)) is not None}
        if ops:
            paths[path] = ops
    return {
        "swagger": "2.0",
        "info": copy.deepcopy(doc.get("info") or {"title": "sourcegate", "version": "1.0"}),
        "host": url.netloc or DEFAULT_HOST,
        "basePath": url.path.rstrip("/") or "/",
        "schemes": [url.scheme or "https"],
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "paths": paths,
        "definitions": {},
        "parameters": {},
        "responses": {},
        "securityDefinitions": {SECURITY_NAME: {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}},
        "security": [{SECURITY_NAME: []}],
        "tags": [],
    }


def api_properties() -> dict[str, Any]:
    """`apiProperties.json`: the API key the maker enters when creating a connection."""
    return {"properties": {
        "connectionParameters": {
            "api_key": {
                "type": "securestring",
                "uiDefinition": {
                    "displayName": f"API key ({API_KEY_HEADER})",
                    "description": "The MCP_API_KEY of the sourcegate server, sent in the x-api-key header.",
                    "tooltip": "The value of MCP_API_KEY on the server",
                    "constraints": {"tabIndex": 2, "clearText": False, "required": "true"},
                },
            },
        },
        "iconBrandColor": "#1f5f8b",
        "capabilities": [],
        "publisher": "sourcegate",
        "stackOwner": "sourcegate",
    }}


def connector_files(host: str = DEFAULT_HOST, settings: Settings | None = None) -> dict[str, dict[str, Any]]:
    """The connector folder's files by name, for a server reachable at https://HOST."""
    settings = settings or Settings(_env_file=None)
    # The connector always sends a key: describe the API as served with MCP_API_KEY set.
    keyed = settings.model_copy(update={"mcp_api_key": settings.mcp_api_key or "set-on-the-server"})
    doc = openapi_document(keyed, f"https://{host}")
    return {"apiDefinition.swagger.json": swagger_from_openapi(doc), "apiProperties.json": api_properties()}


def write_connector(out: Path, host: str = DEFAULT_HOST, settings: Settings | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in connector_files(host, settings).items():
        path = out / name
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
