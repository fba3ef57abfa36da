"""The OpenAPI document of the REST API, written by hand with inline schemas.

Power Platform custom connectors (and Copilot Studio) handle `$ref` poorly, so every schema is
inline; `operationId`, `summary` and `x-ms-summary` name the action in the connector designer.
"""

from __future__ import annotations

from typing import Any

from ..settings import Settings
from .mcp_tool import FILTERS_DESCRIPTION, QUERY_DESCRIPTION, output_schema

API_KEY_HEADER = "x-api-key"


def _error_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"error": {"type": "string", "description": "What went wrong and how to fix it."}},
            "required": ["error"]}


STREAM_DESCRIPTION = (
    "The same question as AskQuestion, answered as server-sent events (`event: NAME` then `data: JSON`, "
    "then a blank line), in this order:\n"
    "- `gate`: once, as soon as the gate has decided, before any answer is written: "
    "{status, guidance, degraded, evidence, conflicts, excluded, missing, model}, shaped as in the final result.\n"
    "- `delta`: {text, path}: answer text to append, sent only when a language model writes the answer "
    "(SOURCEGATE_WRITER=llm) and only for sentences that already passed the citation check; `path` is "
    "`local` or `cloud`. A question split into parts (see `missing`) streams no deltas: each part is "
    "written on its own and `result` carries the whole answer.\n"
    "- `reset`: {path, reason}: drop the text appended so far (that endpoint's answer failed its check "
    "or its call); another endpoint may follow with new `delta` events.\n"
    "- `replace`: {text, reason}: the whole answer is replaced by the extractive answer.\n"
    "- `result`: once, last: the complete result, exactly as AskQuestion returns it. Its `answer` is "
    "authoritative (after a model's deltas it also carries the list of sources) and `writer` says who "
    "wrote it.\n"
    "- `error`: {error}: instead of `result` when the answer could not be completed after the stream "
    "started; discard anything shown from this stream.\n"
    "A question that is refused before the gate decides gets the same JSON error and status code as "
    "from AskQuestion (422, 503 with Retry-After)."
)


def _stream_schema() -> dict[str, Any]:
    return {"type": "string", "description": STREAM_DESCRIPTION,
            "example": 'event: gate\ndata: {"status": "answer_from_evidence", ...}\n\n'
                       'event: delta\ndata: {"text": "Grease the bearings every 2,000 hours [1].", "path": "cloud"}\n\n'
                       'event: result\ndata: {"status": "answer_from_evidence", "answer": "...", ...}\n\n'}


FILTERS_LIST_DESCRIPTION = (
    "The metadata keys a question can filter on (front matter, sidecar and HTML <meta> keys such as "
    "`model` or `product`) and their values among the library's current documents (archived, withdrawn "
    "or superseded revisions are left out; document ids are never listed). Send a `value` back in "
    "AskQuestion's `filters` (`{\"model\": \"HG-3\"}`); `label` is the same text as inert Markdown, for "
    "display. Keys held by most documents come first; `more_keys` and each key's `more_values` count "
    "what the list leaves out. An empty `filters` list: the library has no such keys. `source_type`, "
    "`version`, `status` and `doc_id` (an id prefix) are accepted as filters too, without a list."
)


def _filters_list_schema() -> dict[str, Any]:
    value = {"type": "object", "properties": {
        "value": {"type": "string", "description": "The text to send in `filters`."},
        "label": {"type": "string", "description": "The value as inert Markdown, for display."}},
        "required": ["value", "label"]}
    key = {"type": "object", "properties": {
        "key": {"type": "string", "description": "The filter key (a metadata key of the documents)."},
        "values": {"type": "array", "items": value, "description": "Its values, in order."},
        "more_values": {"type": "integer", "description": "How many more values the list leaves out."}},
        "required": ["key", "values", "more_values"]}
    return {"type": "object", "properties": {
        "filters": {"type": "array", "items": key, "description": "One entry per key; empty when there is none."},
        "more_keys": {"type": "integer", "description": "How many more keys the list leaves out."}},
        "required": ["filters", "more_keys"]}


FEEDBACK_DESCRIPTION = (
    "Record a person's feedback on an answer: right or wrong, the passage that does answer (an `id` among the "
    "answer's evidence, conflicts or excluded passages, or any passage of the library), that no passage answers, "
    "or that the question's premise was false. Each call adds a row tied to the answer's audit record (a second "
    "opinion on the same answer is another row); it never changes the answer. `sourcegate feedback export` turns "
    "the rows into labelled questions."
)


def _feedback_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object",
            "properties": {
                "audit_id": {"type": "string", "description": "The audit_id returned with the answer.",
                             "x-ms-summary": "Audit id"},
                "verdict": {"type": "string", "enum": ["right", "wrong", "premise_false"],
                            "description": "right or wrong: the verdict on the answer; premise_false: the question "
                                           "rests on something that is not true.", "x-ms-summary": "Verdict"},
                "passage_id": {"type": "string", "description": "The id of the passage that does answer (optional).",
                               "x-ms-summary": "Passage id", "x-ms-visibility": "advanced"},
                "no_passage_answers": {"type": "boolean", "description": "True when no passage of the library "
                                       "answers the question (optional; not with passage_id).",
                                       "x-ms-summary": "No passage answers", "x-ms-visibility": "advanced"},
                "note": {"type": "string", "description": "A free-text note (optional).", "x-ms-summary": "Note",
                         "x-ms-visibility": "advanced"},
                "by": {"type": "string", "description": "Who gives the feedback (optional; anonymous when left out).",
                       "x-ms-summary": "By", "x-ms-visibility": "advanced"},
            },
            "required": ["audit_id", "verdict"],
        }}},
    }


def _feedback_row_schema() -> dict[str, Any]:
    def text(description: str, nullable: bool = False) -> dict[str, Any]:
        return {"type": "string", "description": description, **({"nullable": True} if nullable else {})}

    return {"type": "object", "properties": {
        "id": text("Id of the stored feedback."),
        "seq": {"type": "integer", "description": "Its place among the library's feedback rows."},
        "audit_id": text("The answer it is about."),
        "time": text("When it was recorded (UTC, ISO 8601)."),
        "verdict": text("right, wrong or premise_false."),
        "passage_id": text("The passage that does answer, as given.", nullable=True),
        "no_passage_answers": {"type": "boolean", "description": "Whether no passage answers, as given."},
        "note": text("The note, as given (without invisible characters).", nullable=True),
        "by": text("Who gave it, or anonymous."),
        "interface": text("Where it was given: rest, web, mcp or cli."),
        "answer_status": text("The status the answer had.", nullable=True)},
        "required": ["id", "audit_id", "time", "verdict", "no_passage_answers", "by"]}


def _question_body(settings: Settings) -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION,
                                     "x-ms-summary": "Question", "maxLength": settings.max_query_chars},
                           "filters": {"type": "object", "description": FILTERS_DESCRIPTION,
                                       "x-ms-summary": "Filters", "x-ms-visibility": "advanced",
                                       "additionalProperties": {"type": "string"}}},
            "required": ["query"],
        }}},
    }


def openapi_document(settings: Settings, server_url: str) -> dict[str, Any]:
    result = output_schema(openapi=True)
    err = {"description": "Error", "content": {"application/json": {"schema": _error_schema()}}}
    busy = {"description": "Busy or not ready: retry after the Retry-After header's seconds when it is given.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}},
            "content": {"application/json": {"schema": _error_schema()}}}
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
                    "requestBody": _question_body(settings),
                    "responses": {
                        "200": {"description": "The gate's decision, answer and passages.",
                                "content": {"application/json": {"schema": result}}},
                        "400": err, "401": err, "413": err, "422": err, "503": busy,
                    },
                }
            },
            "/v1/ask/stream": {
                "post": {
                    "operationId": "AskQuestionStream",
                    "summary": "Ask the document library, with the answer streamed as it is written",
                    "x-ms-summary": "Ask the document library (streamed)",
                    # Custom connectors cannot read an event stream: keep the action out of their designer.
                    "x-ms-visibility": "internal",
                    "description": STREAM_DESCRIPTION,
                    "requestBody": _question_body(settings),
                    "responses": {
                        "200": {"description": "Server-sent events: gate, delta, reset, replace, then result "
                                               "(or error).",
                                "content": {"text/event-stream": {"schema": _stream_schema()}}},
                        "400": err, "401": err, "413": err, "422": err, "503": busy,
                    },
                }
            },
            "/v1/filters": {
                "get": {
                    "operationId": "ListFilters",
                    "summary": "List the filters a question can use",
                    "x-ms-summary": "List the filters a question can use",
                    "description": FILTERS_LIST_DESCRIPTION,
                    "responses": {
                        "200": {"description": "The library's filter keys and their values.",
                                "content": {"application/json": {"schema": _filters_list_schema()}}},
                        "401": err, "503": busy,
                    },
                }
            },
            "/v1/feedback": {
                "post": {
                    "operationId": "GiveFeedback",
                    "summary": "Give feedback on an answer",
                    "x-ms-summary": "Give feedback on an answer",
                    "description": FEEDBACK_DESCRIPTION,
                    "requestBody": _feedback_body(),
                    "responses": {
                        "201": {"description": "The stored feedback row.",
                                "content": {"application/json": {"schema": _feedback_row_schema()}}},
                        "400": {**err, "description": "Feedback that cannot be recorded: a verdict it does not know, "
                                                      "a passage the answer and the library do not hold, both "
                                                      "passage_id and no_passage_answers."},
                        "401": err,
                        "404": {**err, "description": "No answer with that audit id in this server's audit log."},
                        "413": err, "503": busy,
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
                                "headers": {"x-audit-verified": {
                                    "schema": {"type": "string", "enum": ["true", "false"]},
                                    "description": "Whether the record's hash (with AUDIT_HMAC_SECRET, its HMAC) "
                                                   "matches its content: false means it was edited or forged."}},
                                "content": {"application/json": {"schema": {"type": "object"}}}},
                        "401": err,
                        "403": {**err, "description": "Lookups are off: no MCP_API_KEY on a non-loopback address, "
                                                      "or a browser origin the server does not answer."},
                        "404": err,
                        "409": {**err, "description": "The record is in the log but damaged (its line does not "
                                                      "parse): the log needs an operator."},
                        "503": busy,
                    },
                }
            },
        },
    }
    if settings.mcp_api_key:
        doc["components"] = {"securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}}}
        doc["security"] = [{"apiKey": []}]
    return doc
