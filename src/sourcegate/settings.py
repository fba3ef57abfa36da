"""Settings, read once at the edge (CLI, server) from the environment and an optional `.env`.

Library code takes a `Settings` (or the pieces it needs) as an argument and never reads the
environment itself.
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(name: str, *aliases: str):
    return AliasChoices(name, name.lower(), *aliases)


class Settings(BaseSettings):
    # No `.env` is read unless one is given (`_env_file=`): the CLI passes SOURCEGATE_HOME/.env or
    # --env-file (`env_file_for`), never the working directory's, which belongs to whatever folder
    # the command runs in (a library being ingested, say).
    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True)

    # Where the embedded index and the audit log live. (Not a field named `home`: environment
    # variables also match field names, and every shell has HOME.)
    sourcegate_home: Path = Field(Path(".sourcegate"), validation_alias=_env("SOURCEGATE_HOME"))
    # Store URL: "sqlite:///relative/index.db", "sqlite:////absolute/index.db" (default:
    # SOURCEGATE_HOME/index.db),
    # "postgresql://user:password@host/db" or "azure://SERVICE.search.windows.net/INDEX".
    store_url: str | None = Field(None, validation_alias=_env("SOURCEGATE_STORE"))
    azure_search_api_key: str | None = Field(None, validation_alias=_env("AZURE_SEARCH_API_KEY"))
    embedder: str = Field("use-multilingual", validation_alias=_env("SOURCEGATE_EMBEDDER"))
    max_file_mb: float = Field(50.0, validation_alias=_env("SOURCEGATE_MAX_FILE_MB"))
    # A budget per file: a file whose parsing takes longer or needs more memory fails, the rest go on.
    parse_timeout_s: float = Field(120.0, validation_alias=_env("SOURCEGATE_PARSE_TIMEOUT_S"))
    parse_memory_mb: int = Field(2048, validation_alias=_env("SOURCEGATE_PARSE_MEMORY_MB"))
    # Embedding one document (its vectors and passage features) at most this long; 0: no budget.
    embed_timeout_s: float = Field(120.0, ge=0, validation_alias=_env("SOURCEGATE_EMBED_TIMEOUT_S"))
    chunk_size: int = Field(800, validation_alias=_env("SOURCEGATE_CHUNK_SIZE"))
    chunk_overlap: int = Field(120, validation_alias=_env("SOURCEGATE_CHUNK_OVERLAP"))

    # Gate thresholds (names and defaults from the original gate).
    gate_injection_max: float = Field(0.7, validation_alias=_env("GATE_INJECTION_MAX"))
    gate_superseded_max: float = Field(0.7, validation_alias=_env("GATE_SUPERSEDED_MAX"))
    gate_contradicts_min: float = Field(0.7, validation_alias=_env("GATE_CONTRADICTS_MIN"))
    gate_relevant_min: float = Field(0.45, validation_alias=_env("GATE_RELEVANT_MIN"))
    gate_evidence_min: float = Field(0.55, validation_alias=_env("GATE_EVIDENCE_MIN"))
    # evidence weaker than a current passage's contradiction of the premise is set aside (gate.apply_gate);
    # off by default: measured on ../shared/data/real/dev it broke three answers for one false premise caught
    gate_conflict_outweighs: bool = Field(False, validation_alias=_env("GATE_CONFLICT_OUTWEIGHS"))
    gate_candidates: int = Field(12, validation_alias=_env("GATE_CANDIDATES"))
    # The library's adaptation (`sourcegate adapt`, kept in HOME/adaptations): "auto" answers with the one
    # in force, "off" with the judge alone.
    adaptation: Literal["auto", "off"] = Field("auto", validation_alias=_env("ADAPTATION"))
    # Trust tiers by source_type ("procedure=3, forum=1, *=2"; gate.DEFAULT_TRUST_TIERS): a passage of a
    # lower tier never outweighs a current higher-tier one that contradicts it (docs/how-it-works.md, "Trust tiers").
    gate_trust_tiers: str | None = Field(None, validation_alias=_env("GATE_TRUST_TIERS"))

    # Retrieval.
    retrieve_dense_pool: int = Field(15, validation_alias=_env("RETRIEVE_DENSE_POOL"))
    retrieve_lexical_pool: int = Field(15, validation_alias=_env("RETRIEVE_LEXICAL_POOL"))
    retrieve_min_score: float = Field(0.1, validation_alias=_env("RETRIEVE_MIN_SCORE"))
    retrieve_dense_weight: float = Field(0.85, validation_alias=_env("RETRIEVE_DENSE_WEIGHT"))
    retrieve_lexical_weight: float = Field(0.15, validation_alias=_env("RETRIEVE_LEXICAL_WEIGHT"))
    retrieve_bm25_weight: float = Field(0.08, validation_alias=_env("RETRIEVE_BM25_WEIGHT"))
    retrieve_include_archived: bool = Field(False, validation_alias=_env("RETRIEVE_INCLUDE_ARCHIVED"))
    retrieve_named_versions: bool = Field(True, validation_alias=_env("RETRIEVE_NAMED_VERSIONS"))
    evidence_max_single: int = Field(5, validation_alias=_env("EVIDENCE_MAX_SINGLE"))
    evidence_max_multi: int = Field(8, validation_alias=_env("EVIDENCE_MAX_MULTI"))

    # Questions in another language than the library: add the library's terms from a glossary.
    library_language: str = Field("en", validation_alias=_env("SOURCEGATE_LIBRARY_LANGUAGE"))
    crosslingual: bool = Field(True, validation_alias=_env("SOURCEGATE_CROSSLINGUAL"))
    glossary_path: Path | None = Field(None, validation_alias=_env("SOURCEGATE_GLOSSARY"))

    # Judge backend: local | typesafe | recorded | llm
    judge: str = Field("local", validation_alias=_env("SOURCEGATE_JUDGE"))
    # the local judge's reader and yes/no stages (training/README-local-judge.md, "The reader stage");
    # SOURCEGATE_READER=false leaves the interpretable heads alone
    reader: bool = Field(True, validation_alias=_env("SOURCEGATE_READER"))
    # the reader's contradiction head for contradicts_query_premise (opt-in: training/README-local-judge.md)
    reader_contradiction: bool = Field(False, validation_alias=_env("SOURCEGATE_READER_CONTRADICTION"))
    # a folder of the local judge's weights other than the shipped ones (a refit to try, a fold of a
    # leave-one-source-out figure): the files of `sourcegate/judges/weights/`
    judge_weights: Path | None = Field(None, validation_alias=_env("SOURCEGATE_JUDGE_WEIGHTS"))
    recorded_scores_path: Path | None = Field(None, validation_alias=_env("SOURCEGATE_RECORDED_SCORES"))
    typesafe_api_key: str | None = Field(None, validation_alias=_env("TYPESAFE_API_KEY"))
    typesafe_model: str = Field("jev-1.13.0", validation_alias=_env("TYPESAFE_MODEL"))
    typesafe_base_url: str | None = Field(None, validation_alias=_env("TYPESAFE_BASE_URL"))
    typesafe_concurrency: int = Field(6, validation_alias=_env("TYPESAFE_CONCURRENCY"))
    typesafe_timeout_s: float = Field(30.0, validation_alias=_env("TYPESAFE_TIMEOUT_S"))
    # LLM read-out judge (any OpenAI-compatible endpoint returning logprobs).
    llm_judge_base_url: str | None = Field(None, validation_alias=_env("LLM_JUDGE_BASE_URL"))
    llm_judge_model: str | None = Field(None, validation_alias=_env("LLM_JUDGE_MODEL"))
    llm_judge_api_key: str | None = Field(None, validation_alias=_env("LLM_JUDGE_API_KEY"))

    # Answer writer: "extractive" (quotes, offline) or "llm" (a model words the kept passages;
    # citations checked, the extractive answer when the check fails).
    writer: str = Field("extractive", validation_alias=_env("SOURCEGATE_WRITER"))
    # An OpenAI-compatible base URL (http://localhost:11434/v1) or gguf:/path/model.gguf.
    llm_writer_local: str | None = Field(None, validation_alias=_env("LLM_WRITER_LOCAL"))
    llm_writer_local_model: str | None = Field(None, validation_alias=_env("LLM_WRITER_LOCAL_MODEL"))
    llm_writer_local_api_key: str | None = Field(None, validation_alias=_env("LLM_WRITER_LOCAL_API_KEY"))
    llm_writer_cloud: str | None = Field(None, validation_alias=_env("LLM_WRITER_CLOUD"))
    llm_writer_cloud_model: str | None = Field(None, validation_alias=_env("LLM_WRITER_CLOUD_MODEL"))
    llm_writer_cloud_api_key: str | None = Field(None, validation_alias=_env("LLM_WRITER_CLOUD_API_KEY"))
    # local | local_then_cloud | cloud
    llm_writer_policy: str = Field("local", validation_alias=_env("LLM_WRITER_POLICY"))
    llm_writer_max_tokens: int = Field(256, ge=16, validation_alias=_env("LLM_WRITER_MAX_TOKENS"))
    llm_writer_timeout_s: float = Field(60.0, gt=0, validation_alias=_env("LLM_WRITER_TIMEOUT_S"))
    # The check of a written sentence against the passage it cites (sourcegate/written_check.py;
    # fitted by `python bench/bench_writer.py --fit-check`, to re-run when the reader's weights change).
    # NLI entailment by the reader's head (the local judge's reader), 0 turns the test off:
    llm_writer_entail_min: float = Field(0.0, ge=0, le=1, validation_alias=_env("LLM_WRITER_ENTAIL_MIN"))
    llm_writer_nli: bool = Field(True, validation_alias=_env("LLM_WRITER_NLI"))
    # ask the NLI head about a sentence and a passage in two languages (off: the head reads English only)
    llm_writer_nli_crosslingual: bool = Field(False, validation_alias=_env("LLM_WRITER_NLI_CROSSLINGUAL"))
    # languages the head was trained on (comma-separated): sentences in other languages are not asked
    llm_writer_nli_languages: str = Field("en", validation_alias=_env("LLM_WRITER_NLI_LANGUAGES"))
    # embedding cosine from which a passage sentence is about the same thing (the polarity test)
    llm_writer_related_min: float = Field(0.45, ge=0, le=1, validation_alias=_env("LLM_WRITER_RELATED_MIN"))
    # across languages, a sentence this close to one of its passage restates something of it
    llm_writer_support_min: float = Field(0.4, ge=0, le=1, validation_alias=_env("LLM_WRITER_SUPPORT_MIN"))
    # in the passage's language, this share of a sentence's content words beyond the question must be in it
    llm_writer_overlap_min: float = Field(0.5, ge=0, le=1, validation_alias=_env("LLM_WRITER_OVERLAP_MIN"))
    # Sentences either side of the reader's span and of the best-matching sentence that the model
    # reads of each passage; -1: whole passages.
    llm_writer_excerpt_window: int = Field(1, ge=-1, validation_alias=_env("LLM_WRITER_EXCERPT_WINDOW"))
    # An endpoint that fails this many times in a row (down, timing out, 5xx) is skipped for the
    # cooldown, so a hung local server does not cost every question the full timeout.
    llm_writer_breaker_failures: int = Field(3, ge=1, validation_alias=_env("LLM_WRITER_BREAKER_FAILURES"))
    llm_writer_breaker_cooldown_s: float = Field(30.0, gt=0, validation_alias=_env("LLM_WRITER_BREAKER_COOLDOWN_S"))
    # Threads of the embedded engine (0: up to 4, one per core).
    llm_writer_threads: int = Field(0, ge=0, validation_alias=_env("LLM_WRITER_THREADS"))

    # Serving.
    mcp_api_key: str | None = Field(None, validation_alias=_env("MCP_API_KEY"))
    mcp_tool_name: str = Field("search_procedures", validation_alias=_env("MCP_TOOL_NAME"))
    mcp_tool_description: str = Field(
        "Search the document library and return only passages that support an answer. "
        "Call it for any question about equipment, maintenance, procedures or safety, and "
        "follow the `guidance` field of the result. Never answer from memory.",
        validation_alias=_env("MCP_TOOL_DESCRIPTION"),
    )
    # Host names the server answers for besides localhost, on /mcp and /v1 alike (MCP_ALLOWED_HOSTS
    # is the name it had when only /mcp checked it).
    mcp_allowed_hosts: str = Field("", validation_alias=_env("ALLOWED_HOSTS", "MCP_ALLOWED_HOSTS", "mcp_allowed_hosts"))
    max_query_chars: int = Field(2000, validation_alias=_env("MAX_QUERY_CHARS"))
    max_body_bytes: int = Field(64_000, validation_alias=_env("MAX_BODY_BYTES"))
    max_passage_chars: int = Field(4000, validation_alias=_env("MAX_PASSAGE_CHARS"))

    # Callers with an identity (docs/entra-id.md): an OpenID Connect issuer's access tokens on /mcp
    # and /v1 (Authorization: Bearer), beside the API keys.
    auth_issuer: str | None = Field(None, validation_alias=_env("AUTH_ISSUER"))
    # This server's own resource URI (RFC 8707, RFC 9728): https://sourcegate.example.com/mcp
    auth_resource: str | None = Field(None, validation_alias=_env("AUTH_RESOURCE"))
    # The `aud` values accepted (comma list; default: AUTH_RESOURCE). Entra ID: api://CLIENT-ID, CLIENT-ID.
    auth_audience: str | None = Field(None, validation_alias=_env("AUTH_AUDIENCE"))
    # The issuer's keys (default: `jwks_uri` of AUTH_ISSUER/.well-known/openid-configuration).
    auth_jwks_uri: str | None = Field(None, validation_alias=_env("AUTH_JWKS_URI"))
    # The `tid` a token must carry (Entra ID's directory id), when set.
    auth_tenant_id: str | None = Field(None, validation_alias=_env("AUTH_TENANT_ID"))
    auth_algorithms: str = Field("RS256,PS256,ES256", validation_alias=_env("AUTH_ALGORITHMS"))
    auth_clock_skew_s: float = Field(60.0, ge=0, le=600, validation_alias=_env("AUTH_CLOCK_SKEW_S"))
    # A token signed by a key the cached set lacks fetches the set again, at most once per this long.
    auth_jwks_refresh_min_s: float = Field(60.0, ge=0, validation_alias=_env("AUTH_JWKS_REFRESH_MIN_S"))
    # The cached key set is fetched again when it is this old (keys the issuer withdrew stop working).
    auth_jwks_max_age_s: float = Field(3600.0, gt=0, validation_alias=_env("AUTH_JWKS_MAX_AGE_S"))
    # Scopes named in /.well-known/oauth-protected-resource (what a client asks the issuer for).
    auth_scopes: str = Field("", validation_alias=_env("AUTH_SCOPES"))
    # The web page's sign-in (docs/entra-id.md#web-page-sign-in): the client id registered for the
    # page (set, the page sends people through the issuer's authorization code flow with PKCE), its
    # secret where the issuer wants one for a web redirect URI (Entra ID does), the redirect URI
    # registered (a full URL, or a path on the host the page was opened on) and the scopes asked for
    # (default: openid profile and AUTH_SCOPES).
    auth_web_client_id: str | None = Field(None, validation_alias=_env("AUTH_WEB_CLIENT_ID"))
    auth_web_client_secret: str | None = Field(None, validation_alias=_env("AUTH_WEB_CLIENT_SECRET"))
    auth_web_redirect_uri: str = Field("/auth/callback", validation_alias=_env("AUTH_WEB_REDIRECT_URI"))
    auth_web_scopes: str | None = Field(None, validation_alias=_env("AUTH_WEB_SCOPES"))
    # Seals the sign-in's cookies (encrypted and authenticated); unset, a key is made at first start
    # in SOURCEGATE_HOME/web_session.key (0600). Replicas that share no home need the same value.
    auth_web_session_secret: str | None = Field(None, validation_alias=_env("AUTH_WEB_SESSION_KEY"))
    # API keys, each with the groups it may read: JSON, or the path of a JSON file,
    # {"name": {"key_sha256": "HEX" or "key": "...", "groups": ["..."]}}. MCP_API_KEY stays: a key
    # that reads every group. (Named *_secret so repr() hides it.)
    api_keys_secret: str | None = Field(None, validation_alias=_env("API_KEYS"))
    # What a document that names no readers means to a restricted caller (a token, a key with its own
    # groups): `nobody` reads it (the default: a document nobody marked is not shown to a caller it
    # was not meant for) or `everyone` does. Unrestricted callers read every document (docs/readers.md).
    documents_without_readers: Literal["everyone", "nobody"] = Field(
        "nobody", validation_alias=_env("DOCUMENTS_WITHOUT_READERS"))

    # Audit.
    audit_enabled: bool = Field(True, validation_alias=_env("AUDIT_ENABLED"))
    audit_log_path: Path | None = Field(None, validation_alias=_env("AUDIT_LOG_PATH"))
    audit_redact_query: bool = Field(False, validation_alias=_env("AUDIT_REDACT_QUERY"))
    # Keys the audit log's hash chain (HMAC-SHA256): without the key, nobody can rewrite a record
    # and make the chain verify again. (Named *_secret so repr() hides it.)
    audit_hmac_secret: str | None = Field(None, validation_alias=_env("AUDIT_HMAC_KEY"))

    # Logs: JSON lines at this level (debug, info, warning); unset, one-shot commands print for
    # people and only servers log JSON.
    log_level: str | None = Field(None, validation_alias=_env("SOURCEGATE_LOG_LEVEL"))
    # Where the embedder's parsed model is cached between runs ("off" to turn the cache off).
    cache_dir: str | None = Field(None, validation_alias=_env("SOURCEGATE_CACHE_DIR"))

    # Overload: questions answered at once (0: one per CPU core), questions waiting beyond
    # those, and how long one may wait before it is turned away with 503 and Retry-After.
    serve_max_concurrency: int = Field(0, ge=0, validation_alias=_env("SERVE_MAX_CONCURRENCY"))
    serve_max_queue: int = Field(16, ge=0, validation_alias=_env("SERVE_MAX_QUEUE"))
    serve_queue_timeout_s: float = Field(2.5, gt=0, validation_alias=_env("SERVE_QUEUE_TIMEOUT_S"))
    serve_shutdown_timeout_s: float = Field(30.0, gt=0, validation_alias=_env("SERVE_SHUTDOWN_TIMEOUT_S"))
    # How long an idle keep-alive connection stays open. Longer than clients keep theirs (httpx:
    # 5 s, browsers: seconds, load balancers: 60 s), so that the client, not the server, closes it:
    # otherwise a request sent as the server closes the connection is lost on the way.
    serve_keep_alive_s: float = Field(75.0, gt=0, validation_alias=_env("SERVE_KEEP_ALIVE_S"))
    # The longest a client may take to send one whole request (headers and body), from its first
    # byte or from the connection's start: past it the connection is closed.
    serve_request_timeout_s: float = Field(30.0, gt=0, validation_alias=_env("SERVE_REQUEST_TIMEOUT_S"))
    # Open connections per server process (0: from the open-file limit, raised to its hard limit at
    # start): past it, an idle keep-alive connection is closed to make room, or the new one when
    # none is idle. Idle connections held open by one client exhausted the file descriptors.
    serve_max_connections: int = Field(0, ge=0, validation_alias=_env("SERVE_MAX_CONNECTIONS"))
    # /metrics: this key when set, else MCP_API_KEY when set, else open.
    metrics_api_key: str | None = Field(None, validation_alias=_env("METRICS_API_KEY"))

    # Judge faults: a deadline for judging one question, retries of a failed judge call within
    # it, and a circuit breaker that fails questions closed at once after consecutive failures.
    judge_deadline_s: float = Field(20.0, gt=0, validation_alias=_env("JUDGE_DEADLINE_S"))
    judge_retries: int = Field(1, ge=0, validation_alias=_env("JUDGE_RETRIES"))
    judge_breaker_failures: int = Field(5, ge=1, validation_alias=_env("JUDGE_BREAKER_FAILURES"))
    judge_breaker_cooldown_s: float = Field(30.0, gt=0, validation_alias=_env("JUDGE_BREAKER_COOLDOWN_S"))

    @field_validator("gate_trust_tiers")
    @classmethod
    def _tiers_parse(cls, v):
        from .gate import TrustTiers

        if v is not None:
            TrustTiers.parse(v)  # a ValueError names the item that is not TYPE=TIER
        return v

    @field_validator("documents_without_readers", mode="before")
    @classmethod
    def _without_readers_word(cls, v):
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("auth_algorithms")
    @classmethod
    def _algorithms_asymmetric(cls, v):
        algorithms = [a.strip() for a in v.split(",") if a.strip()]
        refused = [a for a in algorithms if a.lower() == "none" or a.upper().startswith("HS")]
        if refused:
            # A public key is public: a token "signed" with it by HMAC, or not signed, proves nothing.
            raise ValueError(f"AUTH_ALGORITHMS holds {', '.join(refused)}: tokens are verified with the issuer's "
                             "public keys, so `none` and HMAC (HS256, HS384, HS512) are refused; use RS256, PS256, "
                             "ES256 (the default) or another asymmetric algorithm")
        if not algorithms:
            raise ValueError("AUTH_ALGORITHMS is empty: leave it unset for RS256,PS256,ES256")
        return ",".join(algorithms)

    @model_validator(mode="after")
    def _issuer_needs_resource(self):
        if self.auth_issuer and not self.auth_resource:
            raise ValueError("AUTH_ISSUER is set without AUTH_RESOURCE: set AUTH_RESOURCE to this server's own URL "
                             "(https://sourcegate.example.com/mcp), the resource its tokens are issued for")
        if self.auth_web_client_id and not self.auth_issuer:
            raise ValueError("AUTH_WEB_CLIENT_ID is set without AUTH_ISSUER: the web page signs people in with the "
                             "issuer of AUTH_ISSUER; set it (and AUTH_RESOURCE), or unset AUTH_WEB_CLIENT_ID")
        if self.auth_web_session_secret is not None and len(self.auth_web_session_secret.strip()) < 32:
            raise ValueError("AUTH_WEB_SESSION_KEY is shorter than 32 characters: set a random one "
                             "(`openssl rand -hex 32`), or unset it to have one made in SOURCEGATE_HOME")
        return self

    @model_validator(mode="before")
    @classmethod
    def _keywords_win(cls, data):
        """Settings(judge="local") in code (or a CLI flag) wins over the environment. Environment
        values arrive under their alias (SOURCEGATE_JUDGE), keywords under the field name, and
        pydantic would otherwise prefer the alias."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "home" in data:  # Settings(home=...) means SOURCEGATE_HOME
            data["sourcegate_home"] = data.pop("home")
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            if name in data and isinstance(alias, AliasChoices):
                for choice in alias.choices:
                    if isinstance(choice, str) and choice != name:
                        data.pop(choice, None)
        return data

    def __repr_args__(self):
        """repr() and str() hide keys and passwords: settings end up in tracebacks and logs."""
        for name, value in super().__repr_args__():
            if value is not None and name and name.endswith(("_api_key", "_password", "_secret", "_token")):
                value = "***"
            elif name == "store_url" and isinstance(value, str):  # postgresql://user:PASSWORD@...
                from .store import redact_url

                value = redact_url(value)
            yield name, value

    @property
    def home(self) -> Path:
        return self.sourcegate_home

    @property
    def index_path(self) -> Path:
        """The embedded index's file (relative paths are relative to the working directory)."""
        if self.store_url and (self.store_url.startswith("sqlite:///") or "://" not in self.store_url):
            from .store import sqlite_path

            return sqlite_path(self.store_url)
        return self.home / "index.db"

    @property
    def store_location(self) -> str:
        """The store URL, or the embedded index's path."""
        return self.store_url or str(self.index_path)

    def store_options(self) -> dict:
        """Keyword arguments of `open_store` that come from settings."""
        return {"language": self.library_language, "azure_api_key": self.azure_search_api_key}

    @property
    def audit_path(self) -> Path:
        """`{hostname}` in AUDIT_LOG_PATH is this machine's host name: one log (one hash chain) per
        replica when several share a volume (/data/audit/{hostname}.jsonl)."""
        path = self.audit_log_path or (self.home / "audit.jsonl")
        if "{hostname}" in str(path):
            import socket

            path = Path(str(path).replace("{hostname}", socket.gethostname() or "localhost"))
        return path

    @property
    def audit_key(self) -> bytes | None:
        return self.audit_hmac_secret.encode("utf-8") if self.audit_hmac_secret else None

    def trust_tiers(self):
        from .gate import TrustTiers

        return TrustTiers.parse(self.gate_trust_tiers)

    def thresholds(self):
        from .gate import GateThresholds

        return GateThresholds(
            injection_max=self.gate_injection_max,
            superseded_max=self.gate_superseded_max,
            contradicts_min=self.gate_contradicts_min,
            relevant_min=self.gate_relevant_min,
            evidence_min=self.gate_evidence_min,
        )


DEFAULT_HOME_ENV = Path(".sourcegate") / ".env"


def env_file_for(home: str | Path | None, explicit: str | Path | None = None) -> Path | None:
    """The `.env` file settings are read from: `explicit` (--env-file) when given, else `.env` in
    a home folder chosen by --home or SOURCEGATE_HOME, when it exists. The default home,
    ./.sourcegate, lies in the working directory, so its `.env` is no more the operator's than
    ./.env (a folder being ingested could plant either): neither is read."""
    if explicit is not None:
        return Path(explicit)
    chosen = home or os.environ.get("SOURCEGATE_HOME")
    if not chosen:
        return None
    candidate = Path(chosen).expanduser() / ".env"
    return candidate if candidate.is_file() else None
