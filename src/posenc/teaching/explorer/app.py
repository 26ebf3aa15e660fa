"""The explorer's web application: the page, its static files, and a JSON API over posenc.

Endpoints (all ``GET``, served by the routers of :mod:`posenc.teaching.explorer.routers`; every numeric
parameter is range-checked against :mod:`posenc.teaching.explorer.limits`, and anything out of range or
inconsistent is answered with HTTP 422 and a ``detail`` message naming the parameter, the value and
what is allowed):

=================================  ===========================================================
``/``                              the console (``static/index.html``)
``/static/...``                    the console's own scripts and styles, nothing else; among them
                                   ``palette-tables.js``, the palette's tables written from
                                   :mod:`posenc.teaching.lesson.palette`
``/api/meta``                      limits, scaling methods, knowledge-check count, lab status
``/api/sinusoidal``                sinusoidal table, frequencies, wavelengths
``/api/sinusoidal/cell``           one table cell with its formula's numbers
``/api/fingerprint``               one position vector per word of a sentence, seat distances
``/api/rope/dials``                per-pair angles and vectors of a query and a key, and the score
``/api/rope/order``                "dog bites man" vs "man bites dog" on a one-pair clock
``/api/scores``                    score vs relative distance for RoPE, sinusoidal and ALiBi
``/api/alibi``                     ALiBi slopes and bias matrix beside a RoPE score matrix
``/api/precision``                 RoPE angle error by position for bf16/fp16/fp32 and posenc
``/api/scalings``                  every registered rope type: label, colour, sliders, flags
``/api/wavelengths``               wavelength per pair, with scaling overlays
``/api/fixtures``                  the shipped model config fixtures
``/api/fixture``                   wavelengths of one fixture's RoPE
``/api/config``                    current RoPE settings as posenc and Hugging Face config
``/api/lab``                       results of the lab run given at start-up
``/api/eval``                      results of the ``posenc eval`` folder given at start-up
``/api/quiz``                      the knowledge checks (without answers)
``/api/quiz/{id}/answer``          feedback and live evidence for one choice
``/api/lesson/...``                the guided lesson's figures (:mod:`posenc.teaching.lesson.chapters`)
=================================  ===========================================================
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Iterable, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from ..lesson import palette
from .routers import eval as eval_router
from .routers import lab, lesson, workbench

STATIC_DIR = Path(str(resources.files("posenc.teaching.explorer").joinpath("static")))

#: The page loads nothing from anywhere but this server.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; "
        "style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("query", "path"))
        given = error.get("input")
        shown = "" if given is None or isinstance(given, dict) else f" (got {str(given)[:40]!r})"
        parts.append(f"{where or 'request'}: {error.get('msg', 'invalid')}{shown}")
    return "; ".join(parts)


def create_app(
    lab_run: Optional[Path] = None,
    allowed_hosts: Optional[Iterable[str]] = ("127.0.0.1", "localhost", "[::1]"),
    eval_run: Optional[Path] = None,
) -> FastAPI:
    """Build the explorer application.

    Args:
        lab_run: a ``posenc lab`` run folder whose ``results.json`` the lab view shows; fixed here so
            that no request can name a path.
        eval_run: a ``posenc eval`` output folder whose ``results.json`` the eval view shows (fixed alike).
        allowed_hosts: ``Host`` header values accepted, without port, IPv6 addresses in brackets
            (protects a loopback server from pages that rebind their own domain name to 127.0.0.1);
            ``None`` accepts any.
    """
    app = FastAPI(title="posenc explorer", docs_url=None, redoc_url=None, openapi_url=None)
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.state.lab_run = Path(lab_run) if lab_run is not None else None
    app.state.eval_run = Path(eval_run) if eval_run is not None else None

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)

    @app.exception_handler(ValueError)
    async def invalid_value(request: Request, exc: ValueError):
        return JSONResponse({"detail": str(exc)}, status_code=422)

    # the palette's tables, written from posenc.teaching.lesson.palette (their one source); before the mount,
    # which would answer the path first
    @app.get("/static/palette-tables.js", include_in_schema=False)
    def palette_tables():
        return Response(palette.module_source(), media_type="text/javascript")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    for router in (workbench.router, lesson.router, lab.router, eval_router.router):
        app.include_router(router)
    return app
