"""The explorer's HTTP routes, one router per page area.

* :mod:`.workbench`: the console's figures, the scaling registry, fixtures, config and knowledge checks;
* :mod:`.lesson`: the guided lesson's chapters and text, and one route per figure its chapter modules
  declare (``FIGURES``);
* :mod:`.lab`: results of the lab run the server was started with;
* :mod:`.eval`: results of the ``posenc eval`` folder the server was started with.

Every numeric query parameter is made by :func:`.params.limited` from one
:class:`~posenc.teaching.explorer.limits.Limit`, so a route's range, default and help text are the ones
published at ``GET /api/meta`` (the lesson's: ``GET /api/lesson/chapters``).
"""
