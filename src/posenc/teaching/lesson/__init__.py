"""The lesson's one source: what the tour prints and the explorer's lesson draws, computed once.

A chapter written in :mod:`posenc.teaching.lesson.chapters` is one module of pure functions returning its
numbers and its text (:mod:`posenc.teaching.lesson.prose` blocks); the tour prints those blocks and the page
draws them, so the two carry the same sentences and numbers. A definition the tour and the browser
lesson both state lives here, in one pure function, so the two cannot disagree.
:mod:`posenc.teaching.lesson.stretching` holds the measure of context extension ("pairs past training");
:mod:`posenc.teaching.lesson.mistakes` runs the common mistakes beside the right way;
:mod:`posenc.teaching.lesson.attention` gives the attention weights the attention map draws;
:mod:`posenc.teaching.lesson.vectors` gives the example vectors (a word's vector, a seeded query or key, a RoPE
turn at float64) and the reading of a learner's sentence; and
:mod:`posenc.teaching.lesson.manifest` lists the chapters, the one list the explorer's contents and pager and
``posenc tour --list`` come from; :mod:`posenc.teaching.lesson.palette` is the one table of colours, labels and
dashes that the page (served as ``palette-tables.js``), the tour's figures and the lab's reports share.
:mod:`posenc.teaching.lesson.formats` writes the text's numbers (signs, exponents, the minus sign);
:mod:`posenc.teaching.lesson.rotation` turns the lesson's one 2-D query and key with the library's
rotation; and :mod:`posenc.teaching.lesson.trained` loads the small trained models that ship with
posenc, one per position scheme.
"""
