"""Judge backend: TypeSafe's Jev through the official `typesafe-sdk` (`POST /v1/systemone`).

One request per passage, the query and the passage in the state, the five gate questions as noul
questions. A passage whose request or answer is unusable gets an error instead of scores, so the
gate excludes it (fail closed).
"""

from __future__ import annotations

import logging
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from typesafe_sdk import (
    Noul,
    RetryPolicy,
    SystemOneResponse,
    TypeSafeAPIConnectionError,
    TypeSafeAPIError,
    TypeSafeAPIResponseValidationError,
    TypeSafeAPITimeoutError,
    TypeSafeAuthenticationError,
    TypeSafeClient,
    TypeSafeError,
    TypeSafePermissionDeniedError,
    TypeSafeRateLimitError,
)
from typesafe_sdk.constants import DEFAULT_BASE_URL

from ..models import QUESTION_TEXT, QUESTIONS, PassageScores
from .base import Judgement, JudgeInput, PassageJudgement

if TYPE_CHECKING:
    from ..settings import Settings

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 6
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RETRIES = 2
# The SDK's own default first backoff; doubled per retry up to ten times this.
DEFAULT_RETRY_BACKOFF_S = 0.5
_MAX_REASON_CHARS = 200


def is_moving_alias(model: str) -> bool:
    """`jev-latest` and other `-latest` aliases follow new releases, whose probabilities are
    calibrated differently, so thresholds tuned on one release silently shift on the next."""
    return model.strip().lower().endswith("-latest")


@dataclass
class _Outcome:
    judgement: PassageJudgement
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


class TypeSafeJudge:
    """Asks Jev the five gate questions about each passage, up to `concurrency` passages at once.

    Thread-based rather than asyncio so that `judge()` works the same from a plain script and from
    the worker thread an ASGI server runs sync code in, and can be called any number of times.
    """

    name = "typesafe"

    def __init__(
        self,
        api_key: str | None,
        model: str = "jev-1.13.0",
        base_url: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
    ) -> None:
        if not api_key or not api_key.strip():
            raise ValueError(
                "The typesafe judge needs an API key: set TYPESAFE_API_KEY "
                "(or choose another judge with SOURCEGATE_JUDGE=local)."
            )
        if not model or not model.strip():
            raise ValueError("The typesafe judge needs a model: set TYPESAFE_MODEL, e.g. jev-1.13.0.")
        if concurrency < 1:
            raise ValueError(f"TYPESAFE_CONCURRENCY must be at least 1, got {concurrency}.")
        if is_moving_alias(model):
            logger.warning(
                "TYPESAFE_MODEL=%s is a moving alias: a new release behind it shifts the calibrated "
                "probabilities the gate thresholds were tuned on. Pin a version such as jev-1.13.0.",
                model,
            )
        self.model = model.strip()
        # Passed explicitly so the SDK never falls back to reading TYPESAFE_BASE_URL itself:
        # settings are read once, at the edge.
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.concurrency = concurrency
        # Shared by every judge() call, so concurrent queries (server worker threads) together
        # stay within the cap: the rate limit is per account, not per query.
        self._slots = threading.BoundedSemaphore(concurrency)
        try:
            retry = RetryPolicy(
                max_retries=max_retries,
                backoff_initial=retry_backoff_s,
                backoff_max=retry_backoff_s * 10,
            )
            self._client = TypeSafeClient(
                api_key=api_key.strip(),
                model=self.model,
                base_url=self.base_url,
                timeout=timeout,
                retry=retry,
            )
        except TypeSafeError as exc:
            raise ValueError(
                f"Invalid typesafe judge configuration: {exc} Check TYPESAFE_API_KEY and TYPESAFE_TIMEOUT_S."
            ) from exc
        self._questions = {name: Noul(instructions=QUESTION_TEXT[name]) for name in QUESTIONS}

    @classmethod
    def from_settings(cls, settings: Settings) -> TypeSafeJudge:
        return cls(
            api_key=settings.typesafe_api_key,
            model=settings.typesafe_model,
            base_url=settings.typesafe_base_url,
            concurrency=settings.typesafe_concurrency,
            timeout=settings.typesafe_timeout_s,
        )

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        if not passages:
            return Judgement(model=self.model, results=[], usage={"input_tokens": 0, "output_tokens": 0})
        workers = min(self.concurrency, len(passages))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="typesafe-judge") as pool:
            outcomes = list(pool.map(lambda p: self._judge_one(query, p), passages))
        return Judgement(
            model=self._answering_model(outcomes),
            results=[o.judgement for o in outcomes],
            usage={
                "input_tokens": sum(o.input_tokens for o in outcomes),
                "output_tokens": sum(o.output_tokens for o in outcomes),
            },
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TypeSafeJudge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _judge_one(self, query: str, passage: JudgeInput) -> _Outcome:
        state = {
            "query": query,
            "passage": {
                "id": passage.id,
                "title": passage.title,
                "text": passage.text,
                "source_type": passage.source_type,
            },
        }
        try:
            with self._slots:
                response = self._client.system_one(state, self._questions, model=self.model)
            scores = _scores_from(response)
        except Exception as exc:  # noqa: BLE001 - any failure excludes only this passage
            reason = _reason(exc, self.base_url)
            logger.info("typesafe judge failed for passage %s: %s", passage.id, reason)
            return _Outcome(PassageJudgement(id=passage.id, scores=None, error=reason))
        usage = response.usage
        return _Outcome(
            PassageJudgement(id=passage.id, scores=scores),
            model=response.model,
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
        )

    def _answering_model(self, outcomes: list[_Outcome]) -> str:
        # The response names the versioned model that answered, which is what an audit must
        # record; fall back to the pinned name when nothing answered.
        reported = sorted({o.model for o in outcomes if o.model})
        if not reported:
            return self.model
        if len(reported) > 1:
            logger.warning("typesafe answers for one query came from several models: %s", ", ".join(reported))
        return ",".join(reported)


class _MalformedAnswer(Exception):
    pass


def _scores_from(response: SystemOneResponse) -> PassageScores:
    nouls = response.nouls
    values: dict[str, float] = {}
    for name in QUESTIONS:
        answer = nouls.get(name)
        if answer is None:
            raise _MalformedAnswer(f"no noul answer for {name}")
        p = answer.noul
        if not isinstance(p, (int, float)) or not math.isfinite(p) or not 0.0 <= p <= 1.0:
            raise _MalformedAnswer(f"answer for {name} is {p!r}, outside [0, 1]")
        values[name] = float(p)
    return PassageScores(**values)


def _reason(exc: BaseException, base_url: str) -> str:
    """A short, actionable reason for the audit log and the excluded passage."""
    if isinstance(exc, _MalformedAnswer):
        reason = f"malformed answer: {exc}"
    elif isinstance(exc, TypeSafeAPIResponseValidationError):
        reason = f"malformed response at {exc.field_path!r}"
    elif isinstance(exc, (TypeSafeAuthenticationError, TypeSafePermissionDeniedError)):
        reason = f"HTTP {exc.status}: API key rejected, check TYPESAFE_API_KEY"
    elif isinstance(exc, TypeSafeRateLimitError):
        reason = f"HTTP {exc.status}: rate limited after retries, lower TYPESAFE_CONCURRENCY"
    elif isinstance(exc, TypeSafeAPIError):
        reason = f"HTTP {exc.status}: {_message(exc)}"
    elif isinstance(exc, TypeSafeAPITimeoutError):
        reason = "timed out after retries, raise TYPESAFE_TIMEOUT_S if the service is slow"
    elif isinstance(exc, TypeSafeAPIConnectionError):
        reason = f"cannot reach {base_url}, check TYPESAFE_BASE_URL and the network"
    elif isinstance(exc, TypeSafeError):
        reason = str(exc)
    else:
        reason = f"unexpected {type(exc).__name__}: {exc}"
    reason = f"typesafe: {reason}"
    return reason if len(reason) <= _MAX_REASON_CHARS else reason[: _MAX_REASON_CHARS - 1] + "…"


def _message(exc: TypeSafeAPIError) -> str:
    body: Any = exc.body
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return str(value[0].get("msg", value[0]))
    if isinstance(body, str) and body:
        return body
    return type(exc).__name__
