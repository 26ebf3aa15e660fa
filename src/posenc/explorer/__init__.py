"""``posenc explore``: an interactive console in the browser, every number computed by posenc.

:mod:`~posenc.explorer.views`, :mod:`~posenc.explorer.scaling_view`, :mod:`~posenc.explorer.quiz` and
:mod:`~posenc.explorer.lab_results` compute what each view shows; :mod:`~posenc.explorer.app` serves
them as a JSON API next to the single-page console in ``static/``; :mod:`~posenc.explorer.server` is
the command line entry point.
"""
