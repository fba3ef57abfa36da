"""The OpenAPI document of the REST API, written by hand with inline schemas.

Power Platform custom connectors (and Copilot Studio) handle `$ref` poorly, so every schema is
inline; `operationId`, `summary` and `x-ms-summary` name the action in the connector designer.
"""

from __future__ import annotations

from typing import Any

from ..settings import Settings
from .mcp_tool import QUERY_DESCRIPTION, output_schema

API_KEY_HEADER = "x-api-key"


def _error_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"error": {"type": "string", "description": "What went wrong and how to fix it."}},
            "required": ["error"]}


def openapi_document(settings: Settings, server_url: str) -> dict[str, Any]:
    result = output_schema(openapi=True)
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
