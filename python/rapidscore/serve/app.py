"""The HTTP scoring service: a FastAPI application over a :class:`ScoringService`.

``POST /v1/bertscore``, ``/v1/similarity``, ``/v1/ner``, ``/v1/refusal``; ``GET /health`` (200
once warm, 503 before), ``/metrics`` (Prometheus text) and ``/openapi.json``. Bad input: 400
naming the field; a body or a list over the limits: 413; a full queue: 503 with Retry-After.
Needs the ``[serve]`` extra (fastapi, uvicorn).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from rapidscore.common.metric import plain_column
from rapidscore.errors import OverloadedError
from rapidscore.ner.formats import FORMATS as ENTITY_FORMATS
from rapidscore.serve.batching import BatchingScorer, RequestTooLargeError
from rapidscore.serve.config import ServeConfig
from rapidscore.serve.disconnects import CLIENT_GONE, ClientDisconnects
from rapidscore.serve.security import install_access_control
from rapidscore.serve.service import ScoringService, submit_request

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, Response
    from pydantic import BaseModel, ConfigDict, Field
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"rapidscore serve needs the [serve] extra: pip install 'rapidscore[serve]' ({exc})") from exc

__all__ = ["create_app"]

Text = Annotated[str, Field(max_length=100_000)]
ReferenceCell = Union[Text, Annotated[list[Text], Field(min_length=1)]]


class StrictRequest(BaseModel):
    """A request body: a field the server does not know is a 400 naming it ("Extra inputs are not
    permitted"), never ignored: a client asking for an option this server does not apply
    (``rescale_with_baseline``, ``idf``) must not get a 200 with numbers computed without it."""

    model_config = ConfigDict(extra="forbid")


def _request_model(name: str, base: type[BaseModel], metric: str) -> type[BaseModel]:
    """``base`` (the request's columns) with a field per option the metric declares
    (``Metric.request_options``): the request schema, its validation and its OpenAPI entry come
    from the metric's own declaration."""
    from pydantic import create_model

    from rapidscore.metrics import get_metric

    fields: dict[str, Any] = {}
    for option in get_metric(metric).request_options:
        annotation: Any = Literal[option.choices] if option.choices else option.type
        fields[option.name] = (annotation, Field(default=option.default, description=option.help, strict=True,
                                                 ge=option.minimum, le=option.maximum))
    return create_model(name, __base__=base, **fields)


class BERTScoreColumns(StrictRequest):
    candidates: list[Text] = Field(description="Candidate sentences.")
    references: list[ReferenceCell] = Field(
        description="One reference per candidate: a string, or a list of strings (best P, R, F1 each).")


if TYPE_CHECKING:  # the checker sees the columns; the handler reads the options by name
    BERTScoreRequest = BERTScoreColumns
else:
    BERTScoreRequest = _request_model("BERTScoreRequest", BERTScoreColumns, "bertscore")


class BERTScoreResponse(BaseModel):
    precision: list[float]
    recall: list[float]
    f1: list[float]
    signature: str


class SimilarityRequest(StrictRequest):
    generated: list[Text] = Field(min_length=1, description="Generated answers.")
    references: list[ReferenceCell] = Field(description="Ground truth per answer: a string or a list of strings.")
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0, strict=True,  # strict: true is not 1.0
                                    description="Rejected when the similarity is below it (default: the server's).")


class SimilarityResponse(BaseModel):
    similarities: list[float]
    rejected: list[bool]
    rate: float = Field(description="Negative Rejection Rate: the fraction rejected.")
    best_reference: list[int]
    threshold: float
    signature: str


# ner's own list, so that the two never drift (tests/serve/test_strict_requests.py ties them)
EntityFormat = Literal[ENTITY_FORMATS]  # type: ignore[valid-type]


class NERRequest(StrictRequest):
    gold: list[Any] = Field(description="Gold records ({id, text, labels}) or per-record entity lists.")
    predictions: list[Any] = Field(description="Predicted records or entity lists, joined to gold by id or position.")
    texts: list[Text | None] | None = None
    format: EntityFormat = "auto"
    gold_format: EntityFormat | None = None
    label_similarity: Literal["embedding", "exact"] | None = None
    min_jaccard: float = Field(default=0.0, ge=0.0, le=1.0, strict=True)
    min_overlap_percent: float = Field(default=1.0, ge=0.0, le=100.0, strict=True)
    semeval_matching: Literal["optimal", "nervaluate"] = "optimal"
    records: bool = Field(default=False, strict=True, description="Include per-record detail.")


class RefusalResponseItem(StrictRequest):
    answer: Text
    complete: Text | None = None


class RefusalRequest(StrictRequest):
    responses: list[Text | RefusalResponseItem] = Field(
        description="Responses, or chain-of-thought records whose 'answer' is judged.")


class RefusalResponse(BaseModel):
    refusal: list[bool]
    method: str


class ErrorResponse(BaseModel):
    detail: str
    field: str | None = None


_ERRORS: dict = {400: {"model": ErrorResponse, "description": "Bad input (the field is named)."},
                 413: {"model": ErrorResponse, "description": "Body or list over the server's limits."},
                 503: {"model": ErrorResponse, "description": "Overloaded or warming up; see Retry-After."}}


class _ClientError(Exception):
    def __init__(self, status: int, detail: str, field: str | None = None, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.detail, self.field, self.headers = status, detail, field, headers


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _json(document: Any) -> Response:
    try:
        body = json.dumps(document, allow_nan=False, separators=(",", ":"))
    except ValueError:
        body = json.dumps(_finite(document), separators=(",", ":"), default=str)
    return Response(content=body, media_type="application/json")


def _field_of(location: tuple) -> str:
    """('body', 'references', 3, 'list[str]') -> 'references[3]'."""
    parts = [part for part in location if part != "body"]
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        elif not name:
            name = str(part)
        elif part.startswith(("str", "list[", "function-", "RefusalResponseItem", "constrained-")):
            break  # pydantic's name of a union member, not a field
        else:
            name += f".{part}"
    return name or "body"


class _BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes gets 413 before the app reads it, on every
    route, with or without Content-Length (a chunked body is read here, bounded, then replayed to
    the app: the limit raised inside the framework's body reading became its 400 "error parsing the
    body"); every request's status and latency go to the metrics, labelled by route
    (``endpoint_label``: paths no route serves share one label).

    ``fast_routes``: {path: (request model, handler)} for the scoring endpoints whose JSON bodies
    are answered here, without the framework's routing and dependency layers (about 1 ms less per
    request on a small CPU): the same pydantic model validates the body and the same handler
    answers, so the OpenAPI schema and the answers are those of the FastAPI routes, which still
    take every other request to those paths (a body that is not JSON, another method)."""

    def __init__(self, app: Any, service: ScoringService, limit: int, fast_routes: dict | None = None):
        self.app, self.service, self.limit = app, service, limit
        self.fast_routes = fast_routes or {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_recording(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        headers = dict(scope.get("headers") or ())
        length = headers.get(b"content-length")
        fast = self.fast_routes.get(scope.get("path", "")) if scope.get("method") == "POST" else None
        if fast is not None and b"json" not in headers.get(b"content-type", b""):
            fast = None
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _send_error(send_recording, 413, f"request body over {self.limit} bytes", "body")
        elif fast is not None:
            await self._answer_fast(fast, scope, receive, send_recording)
        elif length in (None, b"0") and b"transfer-encoding" not in headers:  # no body
            await self.app(scope, receive, send_recording)
        else:
            content = await self._read_body(receive, send_recording)
            if content is not None:
                await self.app(scope, self._replay(content, receive), send_recording)
        path = scope.get("path", "")
        if path.startswith("/v1/") and not scope.get(CLIENT_GONE):  # a client that left: ClientDisconnects counts it
            from rapidscore.serve.metrics import endpoint_label

            label = endpoint_label(path, self.service.others)
            self.service.metrics.observe_request(label, status[0], time.perf_counter() - started)

    async def _read_body(self, receive: Any, send: Any) -> bytes | None:
        """The whole body; None when the client left or the body went over the limit (413 sent)."""
        chunks, received, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.limit:
                await _send_error(send, 413, f"request body over {self.limit} bytes", "body")
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    @staticmethod
    def _replay(content: bytes, receive: Any) -> Any:
        """A ``receive`` that gives the app ``content`` whole, then what the server says next
        (a disconnect)."""
        replayed = [{"type": "http.request", "body": content, "more_body": False}]

        async def replay() -> dict:
            return replayed.pop() if replayed else await receive()

        return replay

    async def _answer_fast(self, route: tuple, scope: dict, receive: Any, send: Any) -> None:
        from pydantic import ValidationError

        model, handler = route
        content = await self._read_body(receive, send)
        if content is None:
            return
        try:
            body = model.model_validate_json(content)
        except ValidationError as exc:
            errors = exc.errors()
            if any(not error.get("loc") for error in errors):
                # Not JSON, or not an object: the framework words these itself; replay the body.
                await self.app(scope, self._replay(content, receive), send)
                return
            located = [dict(error, loc=("body", *error["loc"])) for error in errors]  # as FastAPI locates them
            await _send_error(send, 400, *_validation_detail(located, "json"))
            return
        try:
            answer = await handler(body)
        except _ClientError as exc:
            await _send_error(send, exc.status, exc.detail, exc.field, exc.headers)
            return
        await _send_json(send, 200, answer.body)


async def _send_error(send: Any, status: int, detail: str, field: str | None, headers: dict | None = None) -> None:
    await _send_json(send, status, json.dumps({"detail": detail, "field": field}).encode(), headers)


async def _send_json(send: Any, status: int, body: bytes, headers: dict | None = None) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    head += [(key.lower().encode(), str(value).encode()) for key, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _validation_detail(errors: list, content_type: str) -> tuple[str, str]:
    """The 400 message of a request body that failed validation, and the field it names."""
    errors = errors or [{"loc": ("body",), "msg": "invalid request"}]
    field = _field_of(tuple(errors[0].get("loc", ("body",))))
    # A union (a reference: a string or a list) fails once per member: say each way it failed.
    messages = list(dict.fromkeys(str(e.get("msg", "invalid")) for e in errors
                                  if _field_of(tuple(e.get("loc", ("body",)))) == field))
    detail = f"{field}: {' or '.join(messages)}"
    if field == "body" and "json" not in content_type:
        detail += " (send a JSON object with Content-Type: application/json)"
    return detail, field


def create_app(config: ServeConfig | None = None, *, service: ScoringService | None = None,
               start: bool = True, fast_path: bool = True) -> Any:
    """The FastAPI application. ``service``: an existing :class:`ScoringService` (default: one
    from ``config``). ``start``: load and warm the models in the background when the server
    starts (``/health`` answers 503 until then). The service's queue is drained at shutdown.
    ``fast_path``: answer JSON bodies of /v1/bertscore and /v1/similarity in the middleware
    (same model, same handler, less per-request work); False sends them through FastAPI."""
    service = service or ScoringService(config)
    config = service.config

    @asynccontextmanager
    async def lifespan(app: Any):  # FastAPI's lifespan protocol
        if start and not service.ready.is_set():
            service.start_in_background()
        yield
        # Uvicorn has stopped accepting and waited for the open requests; answer anything queued.
        await asyncio.to_thread(service.close)

    # /docs and /redoc load their scripts from a CDN: off unless asked for (config.docs).
    app = FastAPI(title="rapidscore", version=_version(), lifespan=lifespan,
                  docs_url="/docs" if config.docs else None, redoc_url="/redoc" if config.docs else None,
                  description="BERTScore, semantic similarity / NRR, NER (DMBertA) and refusal detection, "
                              "with concurrent requests micro-batched into shared encoder passes.")
    app.state.service = service

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, field = _validation_detail(list(exc.errors()), request.headers.get("content-type", ""))
        return JSONResponse({"detail": detail, "field": field}, status_code=400)

    @app.exception_handler(_ClientError)
    async def client_error(request: Request, exc: _ClientError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "field": exc.field}, status_code=exc.status, headers=exc.headers)

    def check_ready() -> None:
        if service.load_error is not None:
            raise _ClientError(503, f"the models failed to load: {service.load_error}")
        if not service.ready.is_set():
            raise _ClientError(503, "warming up", headers={"Retry-After": "1"})

    def loaded(scorer: BatchingScorer | None) -> BatchingScorer:
        check_ready()
        assert scorer is not None  # set before the service is ready
        return scorer

    def check_items(name: str, items: list) -> None:
        if len(items) > config.max_items:
            raise _ClientError(413, f"{name}: {len(items)} items, over the server's limit of {config.max_items}",
                               name)

    def check_lengths(first: str, a: list, second: str, b: list) -> None:
        if len(a) != len(b):
            raise _ClientError(400, f"{second}: {len(b)} items for {len(a)} {first}", second)

    async def run(submit: Any, *args: Any, **kwargs: Any) -> Any:
        """``await submit(*args, **kwargs)``'s future; overload -> 503 + Retry-After, bad input -> 400
        (raised while preparing, or by the worker)."""
        try:
            return await asyncio.wrap_future(await submit_request(submit, *args, **kwargs))
        except OverloadedError as exc:
            raise _ClientError(503, str(exc), headers={"Retry-After": str(math.ceil(exc.retry_after))}) from None
        except RequestTooLargeError as exc:  # over max_texts / max_tokens
            raise _ClientError(413, str(exc), exc.field) from None
        except (ValueError, TypeError, OverflowError) as exc:  # the library names the field where it can
            raise _ClientError(400, str(exc), getattr(exc, "field", None)) from None

    from rapidscore.metrics import get_metric

    bertscore_options = [option.name for option in get_metric("bertscore").request_options]

    @app.post("/v1/bertscore", response_model=BERTScoreResponse, responses=_ERRORS)
    async def bertscore(body: BERTScoreRequest) -> Any:
        """BERTScore precision, recall and F1 of each candidate against its reference(s), with
        the request's options (idf, rescaling): equal to ``BERTScore(...).score``'s."""
        check_ready()
        check_items("candidates", body.candidates)
        check_lengths("candidates", body.candidates, "references", body.references)
        options = {option: getattr(body, option) for option in bertscore_options}
        try:
            scorer = service.bertscore_with(**options)
        except ValueError as exc:  # an option this server cannot apply
            raise _ClientError(400, str(exc), getattr(exc, "field", None)) from None
        result = await run(scorer.submit, body.candidates, body.references)
        return _json({"precision": result.precision.tolist(), "recall": result.recall.tolist(),
                      "f1": result.f1.tolist(), "signature": result.signature})

    @app.post("/v1/nrr", response_model=SimilarityResponse, responses=_ERRORS)
    @app.post("/v1/similarity", response_model=SimilarityResponse, responses=_ERRORS)  # the older path
    async def similarity(body: SimilarityRequest) -> Any:
        """Similarity of each generated answer to its best reference, and the Negative Rejection
        Rate at ``threshold``."""
        check_ready()
        check_items("generated", body.generated)
        check_lengths("generated", body.generated, "references", body.references)
        threshold = config.similarity_threshold if body.threshold is None else body.threshold
        result = await run(loaded(service.similarity).submit, body.generated, body.references, threshold=threshold)
        return _json({"similarities": result.similarities.tolist(), "rejected": result.rejected.tolist(),
                      "rate": result.rate, "best_reference": result.best_reference.tolist(),
                      "threshold": result.threshold, "signature": result.signature})

    @app.post("/v1/ner", responses=_ERRORS)
    async def ner(body: NERRequest) -> Any:
        """DMBertA and SemEval-2013 scores of predicted entities against gold entities
        (``rapidscore.ner.evaluate``; per-record detail with ``records: true``)."""
        check_ready()
        check_items("gold", body.gold)
        check_items("predictions", body.predictions)
        options: dict[str, Any] = dict(format=body.format, min_jaccard=body.min_jaccard,
                                       min_overlap_percent=body.min_overlap_percent,
                                       semeval_matching=body.semeval_matching)
        for name in ("texts", "gold_format", "label_similarity"):
            if getattr(body, name) is not None:
                options[name] = getattr(body, name)
        result = await run(service.ner, body.gold, body.predictions, **options)
        return _json(result.to_dict(records=body.records))

    @app.post("/v1/refusal", response_model=RefusalResponse, responses=_ERRORS)
    async def refusal(body: RefusalRequest) -> Any:
        """Refusal decisions (True = the response refuses), with the server's detector."""
        check_ready()
        check_items("responses", body.responses)
        responses = [item if isinstance(item, str) else item.model_dump() for item in body.responses]
        decisions = await run(loaded(service.refusal).submit, responses)
        return _json({"refusal": decisions.tolist(), "method": config.refusal_method})

    @app.post("/v1/{metric_name}", responses={**_ERRORS, 404: {"model": ErrorResponse,
                                                                "description": "No such metric here."}})
    async def other_metric(metric_name: str, body: dict[str, list]) -> Any:
        """Any other registered metric the server runs (``--metric NAME``): a JSON object of the
        metric's input columns (lists of one length) -> its output columns and signature."""
        scorer = service.others.get(metric_name)
        if scorer is None:
            from rapidscore.metrics import get_metric

            try:
                scorer = service.others.get(get_metric(metric_name).name)
            except ValueError:
                scorer = None
        if scorer is None:
            served = ["bertscore", "nrr", "similarity", "ner", "refusal", *service.others]
            raise _ClientError(404, f"no metric {metric_name!r} on this server (it serves {served})")
        check_ready()
        metric = scorer.metric
        known = [column.name for column in metric.inputs]
        for name, values in body.items():
            if name not in known:  # strict, as the typed routes: an unknown field is never ignored
                raise _ClientError(400, f"{name}: Extra inputs are not permitted ({metric.name} takes {known})", name)
            check_items(name, values)
        outputs = await run(scorer.submit, body)
        document = {name: plain_column(outputs[name]) for name in metric.outputs if name in outputs}
        return _json({**document, "signature": metric.signature(scorer.scorer)})

    @app.get("/health", responses={503: {"model": ErrorResponse, "description": "Not ready yet."}})
    async def health() -> Any:
        """200 once the models are loaded and warm; 503 before (and if loading failed)."""
        check_ready()
        return {"status": "ok"}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> Any:
        """Prometheus text: requests by endpoint and status, latency, batch sizes, queue depth."""
        return PlainTextResponse(service.render_metrics(), media_type="text/plain; version=0.0.4")

    fast_routes = {"/v1/bertscore": (BERTScoreRequest, bertscore), "/v1/nrr": (SimilarityRequest, similarity),
                   "/v1/similarity": (SimilarityRequest, similarity)} if fast_path else None
    app.add_middleware(_BodyLimit, service=service, limit=config.max_body_bytes, fast_routes=fast_routes)
    app.add_middleware(ClientDisconnects, service=service)  # outermost: cancels the work of clients that left
    install_access_control(app, config)  # outside the body limit: no body is read before the key is checked
    return app


def _version() -> str:
    from rapidscore._version import __version__

    return __version__
