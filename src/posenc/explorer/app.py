"""The explorer's web application: the page, its static files, and a JSON API over posenc.

Endpoints (all ``GET``; every numeric parameter is range-checked against
:mod:`posenc.explorer.limits`, and anything out of range or inconsistent is answered with HTTP 422
and a ``detail`` message naming the parameter, the value and what is allowed):

=================================  ===========================================================
``/``                              the console (``static/index.html``)
``/static/...``                    the console's own scripts and styles, nothing else
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
``/api/quiz``                      the knowledge checks (without answers)
``/api/quiz/{id}/answer``          feedback and live evidence for one choice
``/api/lesson/...``                the guided lesson's figures (see :mod:`posenc.explorer.lesson`)
=================================  ===========================================================
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Iterable, Optional

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from . import lab_results, lesson, quiz, scaling_view, views
from .limits import LIMITS, MAX_TEXT_CHARS, MAX_WORD_CHARS, as_dict

STATIC_DIR = Path(str(resources.files("posenc.explorer").joinpath("static")))

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


def _int(name: str, alias: Optional[str] = None):
    limit = LIMITS[name]
    return Query(int(limit.default), ge=int(limit.minimum), le=int(limit.maximum), description=limit.help, alias=alias)


def _float(name: str, alias: Optional[str] = None):
    limit = LIMITS[name]
    return Query(
        float(limit.default),
        ge=float(limit.minimum),
        le=float(limit.maximum),
        allow_inf_nan=False,
        description=limit.help,
        alias=alias,
    )


def _lesson_int(name: str):
    limit = lesson.LESSON_LIMITS[name]
    return Query(int(limit.default), ge=int(limit.minimum), le=int(limit.maximum), description=limit.help)


def _lesson_float(name: str):
    limit = lesson.LESSON_LIMITS[name]
    return Query(
        float(limit.default),
        ge=float(limit.minimum),
        le=float(limit.maximum),
        allow_inf_nan=False,
        description=limit.help,
    )


def _text(default: str):
    return Query(default, min_length=1, max_length=MAX_TEXT_CHARS)


def _word(default: str):
    return Query(default, min_length=1, max_length=MAX_WORD_CHARS)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("query", "path"))
        given = error.get("input")
        shown = "" if given is None or isinstance(given, dict) else f" (got {str(given)[:40]!r})"
        parts.append(f"{where or 'request'}: {error.get('msg', 'invalid')}{shown}")
    return "; ".join(parts)


def create_app(
    lab_run: Optional[Path] = None, allowed_hosts: Optional[Iterable[str]] = ("127.0.0.1", "localhost", "[::1]")
) -> FastAPI:
    """Build the explorer application.

    Args:
        lab_run: a ``posenc lab`` run folder whose ``results.json`` the lab view shows; fixed here so
            that no request can name a path.
        allowed_hosts: ``Host`` header values accepted, without port, IPv6 addresses in brackets
            (protects a loopback server from pages that rebind their own domain name to 127.0.0.1);
            ``None`` accepts any.
    """
    app = FastAPI(title="posenc explorer", docs_url=None, redoc_url=None, openapi_url=None)
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    lab_dir = Path(lab_run) if lab_run is not None else None

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

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    @app.get("/api/meta")
    def meta():
        return {
            "limits": as_dict(),
            "methods": list(scaling_view.METHODS),
            "config_methods": list(scaling_view.CONFIG_METHODS),
            "checks": len(quiz.CHECKS),
            "lab": lab_dir is not None,
        }

    # -- 1. wave fingerprint ---------------------------------------------------------------------
    @app.get("/api/sinusoidal")
    def sinusoidal(length: int = _int("length"), d_model: int = _int("d_model"), base: float = _float("base")):
        return views.sinusoidal_view(length, d_model, base)

    @app.get("/api/sinusoidal/cell")
    def sinusoidal_cell(
        pos: int = _int("pos"), dim: int = _int("dim"), d_model: int = _int("d_model"), base: float = _float("base")
    ):
        return views.sinusoidal_cell(pos, dim, d_model, base)

    @app.get("/api/fingerprint")
    def fingerprint(
        text: str = _text("the dog bites the man"), d_model: int = _int("d_model"), base: float = _float("base")
    ):
        return views.fingerprint_view(text, d_model, base)

    # -- 2. RoPE clock dials ---------------------------------------------------------------------
    @app.get("/api/rope/dials")
    def rope_dials(
        head_dim: int = _int("head_dim"),
        base: float = _float("base"),
        q_pos: int = _int("q_pos"),
        k_pos: int = _int("k_pos"),
        offset: int = _int("offset"),
        seed: int = _int("seed"),
    ):
        return views.rope_dials(head_dim, base, q_pos, k_pos, offset, seed)

    @app.get("/api/rope/order")
    def rope_order(
        text_a: str = _text("dog bites man"),
        text_b: str = _text("man bites dog"),
        query_word: str = _word("bites"),
        key_word: str = _word("dog"),
        degrees: float = _float("degrees"),
    ):
        return views.word_order_view(text_a, text_b, query_word, key_word, degrees)

    # -- 3. score vs distance --------------------------------------------------------------------
    @app.get("/api/scores")
    def scores(
        head_dim: int = _int("head_dim"),
        base: float = _float("base"),
        d_model: int = _int("d_model"),
        sin_base: float = _float("base"),
        heads: int = _int("heads"),
        max_distance: int = _int("max_distance"),
        compare_base: Optional[float] = Query(
            None,
            ge=float(LIMITS["base"].minimum),
            le=float(LIMITS["base"].maximum),
            allow_inf_nan=False,
            description="a second RoPE base to compare",
        ),
    ):
        return views.scores_view(head_dim, base, d_model, sin_base, heads, max_distance, compare_base)

    # -- 5. ALiBi ----------------------------------------------------------------------------------
    @app.get("/api/alibi")
    def alibi(
        heads: int = _int("heads"),
        head: int = _int("head"),
        matrix_len: int = _int("matrix_len"),
        head_dim: int = _int("head_dim"),
        base: float = _float("base"),
        seed: int = _int("seed"),
    ):
        return views.alibi_view(heads, head, matrix_len, head_dim, base, seed)

    # -- 6. precision ------------------------------------------------------------------------------
    @app.get("/api/precision")
    def precision(
        head_dim: int = _int("head_dim"),
        base: float = _float("base"),
        max_position: int = _int("max_position"),
        pos: int = Query(
            1_000_000,
            ge=0,
            le=int(LIMITS["max_position"].maximum),
            description="position whose per-pair errors are listed",
        ),
    ):
        return views.precision_view(head_dim, base, max_position, pos)

    # -- 4. wavelengths and scalings ---------------------------------------------------------------
    @app.get("/api/scalings")
    def scalings():
        return {"scalings": scaling_view.scalings_metadata()}

    @app.get("/api/wavelengths")
    def wavelengths(
        rotary_dim: int = _int("rotary_dim"),
        base: float = _float("base"),
        train_len: int = _int("train_len"),
        methods: str = Query(
            "", max_length=100, description="comma-separated overlays: " + ",".join(scaling_view.METHODS)
        ),
        factor: float = _float("factor"),
        seq_len: int = _int("seq_len"),
        beta_fast: float = _float("beta_fast"),
        beta_slow: float = _float("beta_slow"),
        low_freq_factor: float = _float("low_freq_factor"),
        high_freq_factor: float = _float("high_freq_factor"),
    ):
        return scaling_view.wavelengths_view(
            rotary_dim,
            base,
            train_len,
            scaling_view.parse_methods(methods),
            factor=factor,
            seq_len=seq_len,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            low_freq_factor=low_freq_factor,
            high_freq_factor=high_freq_factor,
        )

    @app.get("/api/fixtures")
    def fixtures():
        return {"fixtures": scaling_view.fixture_list()}

    @app.get("/api/fixture")
    def fixture(name: str = Query(..., min_length=1, max_length=120)):
        return scaling_view.fixture_view(name)

    # -- 9. copy as config -------------------------------------------------------------------------
    @app.get("/api/config")
    def config(
        head_dim: int = _int("head_dim"),
        rotary_dim: Optional[int] = Query(
            None, ge=2, le=int(LIMITS["rotary_dim"].maximum), description=LIMITS["rotary_dim"].help
        ),
        base: float = _float("base"),
        layout: str = Query("half", max_length=20),
        method: str = Query("default", max_length=20),
        max_position_embeddings: int = _int("max_position_embeddings"),
        factor: float = _float("factor"),
        original_max_position_embeddings: int = _int("original_max_position_embeddings"),
        beta_fast: float = _float("beta_fast"),
        beta_slow: float = _float("beta_slow"),
        low_freq_factor: float = _float("low_freq_factor"),
        high_freq_factor: float = _float("high_freq_factor"),
    ):
        return scaling_view.config_view(
            head_dim,
            head_dim if rotary_dim is None else rotary_dim,
            base,
            layout,
            method,
            max_position_embeddings=max_position_embeddings,
            factor=factor,
            original=original_max_position_embeddings,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            low_freq_factor=low_freq_factor,
            high_freq_factor=high_freq_factor,
        )

    # -- 7. lab results ----------------------------------------------------------------------------
    @app.get("/api/lab")
    def lab(
        points: int = Query(
            lab_results.MAX_CURVE_POINTS,
            ge=1,
            le=lab_results.MAX_CURVE_POINTS,
            description="points per loss curve (bucket means)",
        ),
    ):
        return lab_results.read_lab_results(lab_dir, points)

    # -- 8. knowledge checks -----------------------------------------------------------------------
    @app.get("/api/quiz")
    def quiz_list():
        return {"checks": quiz.questions()}

    @app.get("/api/quiz/{check_id}/answer")
    def quiz_answer(check_id: str, choice: int = Query(..., ge=0, le=9)):
        return quiz.answer(check_id, choice)

    # -- the guided lesson -------------------------------------------------------------------------
    @app.get("/api/lesson/chapters")
    def lesson_chapters():
        return lesson.chapters() | {"limits": lesson.limits_dict()}

    @app.get("/api/lesson/bag")
    def lesson_bag(
        text: str = _text("the dog bit the man"),
        shuffle: int = _lesson_int("shuffle"),
        scheme: str = Query("nope", max_length=20),
    ):
        return lesson.bag_of_tiles(text, shuffle, scheme)

    @app.get("/api/lesson/input")
    def lesson_input(
        word: str = _word("dog"),
        seat: int = _lesson_int("seat"),
        d_model: int = Query(16, ge=2, le=64, description="width of both vectors (even)"),
        embed_std: float = _lesson_float("embed_std"),
    ):
        return lesson.word_plus_position(word, seat, d_model, embed_std)

    @app.get("/api/lesson/bad-ideas")
    def lesson_bad_ideas(raw_seat: int = _lesson_int("raw_seat"), sentence_len: int = _lesson_int("sentence_len")):
        return lesson.bad_ideas(raw_seat, sentence_len)

    @app.get("/api/lesson/rules")
    def lesson_rules(
        length: int = _lesson_int("rules_len"),
        d_model: int = Query(64, ge=2, le=256, description="width of the codes (even)"),
    ):
        return lesson.three_rules(length, d_model)

    @app.get("/api/lesson/clock")
    def lesson_clock(seat: int = _lesson_int("wave_seat"), d_model: int = _lesson_int("wave_d_model")):
        return lesson.clock_hands(seat, d_model)

    @app.get("/api/lesson/learned")
    def lesson_learned(tokens: int = _lesson_int("tokens"), stretch_to: int = _lesson_int("stretch_to")):
        return lesson.learned_wall(tokens, stretch_to)

    @app.get("/api/lesson/rotate")
    def lesson_rotate(
        a: float = _lesson_float("a"),
        b: float = _lesson_float("b"),
        seat: int = _lesson_int("rot_seat"),
        theta_deg: float = _lesson_float("theta_deg"),
    ):
        return lesson.rotate_vector(a, b, seat, theta_deg)

    @app.get("/api/lesson/rope")
    def lesson_rope(
        head_dim: int = _lesson_int("rope_head_dim"),
        m: int = _lesson_int("m"),
        n: int = _lesson_int("n"),
        shift: int = _lesson_int("shift"),
    ):
        return lesson.rope_clock(head_dim, m, n, shift)

    @app.get("/api/lesson/order")
    def lesson_order(
        sentence: int = Query(0, ge=0, le=1, description="0: the dog bit the man; 1: swapped"),
        degrees: float = _lesson_float("order_deg"),
    ):
        return lesson.word_order(sentence, degrees)

    @app.get("/api/lesson/stretch")
    def lesson_stretch(
        factor: float = _lesson_float("factor"),
        train_len: int = _lesson_int("train_len"),
        head_dim: int = _lesson_int("stretch_head_dim"),
    ):
        return lesson.stretching(factor, train_len, head_dim)

    @app.get("/api/lesson/alibi")
    def lesson_alibi(heads: int = _lesson_int("alibi_heads"), distance: int = _lesson_int("alibi_distance")):
        return lesson.alibi_penalty(heads, distance)

    @app.get("/api/lesson/compare")
    def lesson_compare(length: int = _lesson_int("compare_len")):
        return lesson.compare(length)

    @app.get("/api/lesson/demo")
    def lesson_demo(shift: int = _lesson_int("shift"), d_model: int = _lesson_int("demo_d_model")):
        return lesson.run_demo(shift, d_model)

    @app.get("/api/lesson/mistakes")
    def lesson_mistakes(
        steps: int = _lesson_int("steps"),
        d_model: int = _lesson_int("concat_d_model"),
        shift: int = _lesson_int("shift"),
    ):
        return lesson.mistakes(steps, d_model, shift)

    @app.get("/api/lesson/big-picture")
    def lesson_big_picture(scheme: str = Query("rope", max_length=20)):
        return lesson.big_picture(scheme)

    return app
