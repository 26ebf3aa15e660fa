"""The lab view's API: results of the ``posenc lab`` run given when the server started.

The run folder is fixed by :func:`posenc.teaching.explorer.app.create_app` (``app.state.lab_run``) so that no
request can name a path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import lab_results
from ..limits import Limit
from .params import limited

router = APIRouter()

_POINTS = Limit(1, lab_results.MAX_CURVE_POINTS, lab_results.MAX_CURVE_POINTS, "points per loss curve (bucket means)")


@router.get("/api/lab")
def lab(request: Request, points: int = limited(_POINTS)):
    return lab_results.read_lab_results(request.app.state.lab_run, points)
