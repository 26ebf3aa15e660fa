"""The eval view's API: results of the ``posenc eval`` folder given when the server started.

The folder is fixed by :func:`posenc.teaching.explorer.app.create_app` (``app.state.eval_run``) so that no
request can name a path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import eval_results

router = APIRouter()


@router.get("/api/eval")
def eval_run(request: Request):
    return eval_results.read_eval_results(getattr(request.app.state, "eval_run", None))
