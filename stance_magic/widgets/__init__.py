"""The panel (``stance_magic.panel()``, ``%stance panel``): an ipywidgets
dropdown that sets the session's stance, and a live area with the last
measured cell. :mod:`.panel` holds the panel; its tree of widgets is built by
:mod:`.tree`, its controls are in :mod:`.controls`, its live area in
:mod:`.live`, and the diff of two cells it shows in :mod:`.diff`. Named
``widgets`` (not ``panel``): ``stance_magic.panel`` is the public function."""
