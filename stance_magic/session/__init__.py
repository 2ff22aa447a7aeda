"""The session: the engine that holds the stance, the history and the
watches (:mod:`.engine`), the notebook cells it tracks (:mod:`.cells`), who
is told of a report (:mod:`.observers`), and one measuring window
(:mod:`.measurement`), asked for by a :class:`~stance_magic.spec.MeasureSpec`
(a value every layer reads, so it stays at the top). No IPython in here: the
front ends (:mod:`stance_magic.frontend`, the panel, ``measure()``) call it."""
