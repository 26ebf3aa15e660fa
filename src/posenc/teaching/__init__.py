"""The teaching apps: one lesson, told in the terminal and drawn in the browser.

* :mod:`~posenc.teaching.lesson`      the one source: chapters as pure functions returning prose,
  numbers, figure data and checks; its palette and number formats;
* :mod:`~posenc.teaching.tour`        ``posenc tour``: the lesson printed, with its figures;
* :mod:`~posenc.teaching.explorer`    ``posenc explore``: the lesson and the workbench in the browser;
* :mod:`~posenc.teaching.input_sizes` the lengths of a word vector and a position vector at a model's
  input, which the tour and the explorer's checks share.

The tour and the explorer stand on the lesson and never import each other.
"""
