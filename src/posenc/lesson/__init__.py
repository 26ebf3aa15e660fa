"""The lesson's one source: what the tour prints and the explorer's lesson draws, computed once.

A definition the tour and the browser lesson both state lives here, in one pure function, so the two
cannot disagree. :mod:`posenc.lesson.stretching` holds the measure of context extension ("pairs past
training"); :mod:`posenc.lesson.mistakes` runs the common mistakes beside the right way.
"""
