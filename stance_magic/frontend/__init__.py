"""The IPython front end: the ``%stance`` / ``%%stance`` magics
(:mod:`.magics`), their options and help (:mod:`.options`), the line
commands (:mod:`.commands`), running a cell's code as IPython would
(:mod:`.execution`), showing a report (:mod:`.display`), and loading and
unloading the extension (:mod:`.extension`). A thin layer: it describes a
block and hands it to the session (:mod:`stance_magic.session`)."""
