"""The OpenAPI document of the REST API, written by hand with inline schemas.

Power Platform custom connectors (and Copilot Studio) handle `$ref` poorly, so every schema is
inline; `operationId`, `summary` and `x-ms-summary` name the action in the connector designer.
"""

from __future__ import annotations

import copy
from typing import Any

from ..settings import Settings
from .mcp_tool import QUERY_DESCRIPTION, output_schema

API_KEY_HEADER = "x-api-key"


def _nullable_to_30(schema: Any) -> Any:
    """JSON Schema `type: [X, "null"]` is OpenAPI 3.1; write it the 3.0 way (`nullable: true`),
    which the connector importer understands."""
    if isinstance(schema, dict):
        out = {k: _nullable_to_30(v) for k, v in schema.items()}
        t = out.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            out["type"] = rest[0] if len(rest) == 1 else rest
            if "null" in t:
                out["nullable"] = True
        if "anyOf" in out:
            alts = [a for a in out["anyOf"] if a.get("type") != "null"]
            if len(alts) == 1 and len(alts) < len(out["anyOf"]):
                del out["anyOf"]
                out.update(alts[0])
                out["nullable"] = True
        return out
    if isinstance(schema, list):
        return [_nullable_to_30(x) for x in schema]
    return schema


def _error_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"error": {"type": "string", "description": "What went wrong and how to fix it."}},
            "required": ["error"]}


def openapi_document(settings: Settings, server_url: str) -> dict[str, Any]:
    result = _nullable_to_30(copy.deepcopy(output_schema()))
    err = {"description": "Error", "content": {"application/json": {"schema": _error_schema()}}}
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": "sourcegate",
            "version": "1.0",
            "description": "Ask the document library; get a cited answer, a premise conflict or an abstention.",
        },
        "servers": [{"url": server_url.rstrip("/")}],
        "paths": {
            "/v1/ask": {
                "post": {
                    "operationId": "AskQuestion",
                    "summary": "Ask the document library",
                    "x-ms-summary": "Ask the document library",
                    "description": settings.mcp_tool_description,
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {
                            "type": "object",
                            "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION,
                                                     "x-ms-summary": "Question", "maxLength": settings.max_query_chars}},
                            "required": ["query"],
                        }}},
                    },
                    "responses": {
                        "200": {"description": "The gate's decision, answer and passages.",
                                "content": {"application/json": {"schema": result}}},
                        "400": err, "401": err, "413": err, "422": err,
                    },
                }
            },
            "/v1/audit/{audit_id}": {
                "get": {
                    "operationId": "GetAuditRecord",
                    "summary": "Get the audit record of an answer",
                    "x-ms-summary": "Get the audit record of an answer",
                    "parameters": [{"name": "audit_id", "in": "path", "required": True, "schema": {"type": "string"},
                                    "x-ms-summary": "Audit id", "description": "The audit_id returned with an answer."}],
                    "responses": {
                        "200": {"description": "The audit record (canonical JSON, with its record_hash).",
                                "content": {"application/json": {"schema": {"type": "object"}}}},
                        "401": err, "404": err,
                    },
                }
            },
        },
    }
    if settings.mcp_api_key:
        doc["components"] = {"securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}}}
        doc["security"] = [{"apiKey": []}]
    return doc
