"""``posenc explore``: an interactive console in the browser, every number computed by posenc.

:mod:`~posenc.teaching.explorer.views`, :mod:`~posenc.teaching.explorer.scaling_view`,
:mod:`~posenc.teaching.explorer.quiz` and :mod:`~posenc.teaching.explorer.lab_results` compute what each
view shows; :mod:`~posenc.teaching.explorer.app` serves them as a JSON API next to the single-page
console in ``static/``; :mod:`~posenc.teaching.explorer.server` is the command line entry point.
:mod:`~posenc.teaching.explorer.routers` holds the routes, one router per page area, whose query
parameters are bounded by :mod:`~posenc.teaching.explorer.limits`; :mod:`~posenc.teaching.explorer.lesson`
is the guided lesson's glue (its figures' limits and chapter list) and
:mod:`~posenc.teaching.explorer.eval_results` reads a ``posenc eval`` folder for the eval view.
"""
