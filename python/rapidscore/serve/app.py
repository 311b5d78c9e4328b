"""The HTTP scoring service: a FastAPI application over a :class:`ScoringService`.

``POST /v1/NAME`` for every served metric (its name and each alias: ``/v1/bertscore``,
``/v1/nrr`` and ``/v1/similarity``, ``/v1/ner``, ``/v1/refusal``, and any registered one), each
route made by one factory from the metric's declaration (request and response models, options,
OpenAPI entry); ``GET /health`` (200 once warm, 503 before), ``/metrics`` (Prometheus text) and
``/openapi.json``. Bad input: 400 naming the field; a body or a list over the limits: 413; a full
queue: 503 with Retry-After. Needs the ``[serve]`` extra (fastapi, uvicorn).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, Optional, Union

from rapidscore.common.metric import request_options
from rapidscore.errors import OverloadedError
from rapidscore.serve.batching import RequestTooLargeError
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

__all__ = ["create_app", "request_model", "response_model"]

Text = Annotated[str, Field(max_length=100_000)]
ReferenceCell = Union[Text, Annotated[list[Text], Field(min_length=1)]]


class StrictRequest(BaseModel):
    """A request body: a field the server does not know is a 400 naming it ("Extra inputs are not
    permitted"), never ignored: a client asking for an option this server does not apply
    must not get a 200 with numbers computed without it."""

    model_config = ConfigDict(extra="forbid")


class ResponseItem(StrictRequest):
    """A chain-of-thought response: its ``answer`` is judged."""

    answer: Text
    complete: Text | None = None


# a request field's type per column kind (``Column.kind``): one value per row
_CELL_TYPES: dict[str, Any] = {"text": Text, "texts": ReferenceCell, "entities": Any, "any": Any,
                               "response": Union[Text, ResponseItem]}


def _model_name(metric: Any, suffix: str) -> str:
    """``BERTScoreMetric`` -> ``BERTScoreRequest``; a metric class of another name: its name."""
    stem = type(metric).__name__
    return (stem[:-len("Metric")] if stem.endswith("Metric") and stem != "Metric" else stem) + suffix


def request_model(metric: Any) -> type[BaseModel]:
    """The request body of ``metric``'s route, from its declaration: one list field per input
    column (``Column.request_field``) and one field per request option (type, bounds, default
    and documentation from the metric's request options), strict (an unknown field is a 400)."""
    from pydantic import create_model

    fields: dict[str, Any] = {}
    for column in metric.inputs:
        cell: Any = _CELL_TYPES.get(column.kind, Any)
        if column.optional:
            fields[column.field] = (Optional[list[Optional[cell]]], Field(default=None, description=column.help))
        else:
            fields[column.field] = (list[cell], Field(description=column.help, min_length=metric.rows.minimum or None))
    for option in request_options(metric):
        annotation: Any = Literal[option.choices] if option.choices else option.type
        if option.default is None:
            annotation = Optional[annotation]
        strict = None if option.choices else True  # strict: true is not 1, "1" is not 1 (a Literal is exact)
        fields[option.name] = (annotation, Field(default=option.default, description=option.help, strict=strict,
                                                 ge=option.minimum, le=option.maximum))
    return create_model(_model_name(metric, "Request"), __base__=StrictRequest, **fields)


def response_model(metric: Any) -> type[BaseModel]:
    """The answer of ``metric``'s route (``Metric.front_ends.response_fields``; default: each output column as
    a list, and the signature)."""
    from pydantic import create_model

    declared = metric.front_ends.response_fields
    if declared is None:
        declared = {**dict.fromkeys(metric.outputs, list[Any]), "signature": str}
    fields: dict[str, Any] = {name: (kind, None if _optional(kind) else ...) for name, kind in declared.items()}
    return create_model(_model_name(metric, "Response"), **fields)


def _optional(kind: Any) -> bool:
    import typing

    return type(None) in typing.get_args(kind)


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
        elif part.startswith(("str", "list[", "function-", "ResponseItem", "constrained-")):
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
            from rapidscore.serve.prometheus import endpoint_label

            label = endpoint_label(path, self.service.paths)
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
    ``fast_path``: answer JSON bodies of the metrics' routes in the middleware (same model,
    same handler, less per-request work); False sends them through FastAPI."""
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
                  description="Evaluation metrics (" + ", ".join(m.front_ends.summary for m in service.served.values())
                              + "), with concurrent requests micro-batched into shared encoder passes.")
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

    def check_items(name: str, items: list) -> None:
        if len(items) > config.max_items:
            raise _ClientError(413, f"{name}: {len(items)} items, over the server's limit of {config.max_items}",
                               name)

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

    def metric_route(metric: Any) -> tuple:
        """The route of ``metric`` (at its name and each alias), from its declaration: the
        request's columns and options, the scorer of its engine options, the task's arguments,
        the answer. Returns (request model, handler) for the fast path."""
        columns = metric.inputs
        required = [column for column in columns if not column.optional]
        option_names = [option.name for option in request_options(metric)]

        async def score(body: Any) -> Any:
            check_ready()
            values: dict[str, Any] = {}
            for column in columns:
                value = getattr(body, column.field)
                if value is not None:
                    check_items(column.field, value)
                    value = [item.model_dump() if isinstance(item, BaseModel) else item for item in value]
                values[column.name] = value
            if metric.rows.aligned and required:
                first = values[required[0].name]
                for column in columns[1:]:
                    value = values[column.name]
                    if value is not None and len(value) != len(first):
                        raise _ClientError(400, f"{column.field}: {len(value)} items for {len(first)} "
                                                f"{required[0].field}", column.field)
            options = {name: getattr(body, name) for name in option_names}
            try:
                scorer = service.built_scorer(metric, **options)
                if scorer is None:  # first use of these settings: resolved and built off the event loop
                    scorer = await asyncio.to_thread(service.scorer, metric, **options)
                settings = service.settings(metric, options)
            except ValueError as exc:  # an option this server cannot apply
                raise _ClientError(400, str(exc), getattr(exc, "field", None)) from None
            args, kwargs = service.task_arguments(metric, values, options)
            result = await run(scorer.submit, *args, **kwargs)
            return _json(service.response(metric, result, scorer, settings))

        model = request_model(metric)
        score.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model)])
        summary = metric.front_ends.summary
        score.__doc__ = (f"{summary[:1].upper()}{summary[1:]}: {', '.join(metric.outputs)} of each "
                         f"row, with the request's options (equal to the Python API's).")
        answer = response_model(metric)
        for path in (metric.name, *metric.front_ends.aliases):
            app.post(f"/v1/{path}", response_model=answer, responses=_ERRORS,
                     operation_id=f"score_{path}")(score)
        return model, score

    fast_routes: dict = {}
    for metric in service.served.values():
        route = metric_route(metric)
        fast_routes.update({f"/v1/{path}": route for path in (metric.name, *metric.front_ends.aliases)})

    @app.post("/v1/{metric_name}", include_in_schema=False)
    async def no_metric(metric_name: str) -> Any:
        raise _ClientError(404, f"no metric {metric_name!r} on this server (it serves {sorted(service.paths)})")

    # HEAD as well as GET: probes that ask for the status alone (the server sends no body to a HEAD).
    @app.api_route("/health", methods=["GET", "HEAD"],
                   responses={503: {"model": ErrorResponse, "description": "Not ready yet."}})
    async def health() -> Any:
        """200 once the models are loaded and warm; 503 before (and if loading failed). HEAD: the
        same status and headers, no body."""
        check_ready()
        return {"status": "ok"}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> Any:
        """Prometheus text: requests by endpoint and status, latency, batch sizes, queue depth."""
        return PlainTextResponse(service.render_metrics(), media_type="text/plain; version=0.0.4")

    app.add_middleware(_BodyLimit, service=service, limit=config.max_body_bytes,
                       fast_routes=fast_routes if fast_path else None)
    app.add_middleware(ClientDisconnects, service=service)  # outermost: cancels the work of clients that left
    install_access_control(app, config)  # outside the body limit: no body is read before the key is checked
    return app


def _version() -> str:
    from rapidscore._version import __version__

    return __version__
