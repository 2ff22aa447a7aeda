"""The public API as a user's type checker sees it.

Never run (pytest does not collect it): ``mypy`` reads it in ``make lint``
(``[tool.mypy]`` in pyproject.toml). Each ``assert_type`` fails there if a public
name loses its type (a lazy name no longer imported under ``TYPE_CHECKING`` in
``stance_magic/__init__.py`` reads as ``object``); each ``type: ignore[code]``
fails there (``warn_unused_ignores``) if a mistake is no longer an error.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import stance_magic

if TYPE_CHECKING:
    from typing_extensions import assert_type

    from stance_magic.render import BreakEntry, BreakList, History
    from stance_magic.session.engine import Engine
    from stance_magic.widgets.panel import StancePanel


def uses(path: os.PathLike[str]) -> None:
    sm = stance_magic
    assert_type(sm.measure("default"), AbstractContextManager[sm.Measured])
    with sm.measure(memory=True, ranks="full", trace=path) as rep:
        pass
    assert_type(rep, sm.Measured)
    assert_type(rep.report, sm.CellReport)
    assert_type(rep.done, bool)
    assert_type(rep.report.compiles, int)

    assert_type(sm.history(), History[sm.CellReport])
    assert_type(sm.history()[-1], sm.CellReport)
    assert_type(sm.breaks(), BreakList)
    assert_type(sm.breaks()[0], BreakEntry)
    assert_type(sm.bundle(path), str)
    assert_type(sm.bundle("bug.zip", sm.history()[-1]), str)
    assert_type(sm.get_engine(), Engine)

    assert_type(sm.current_stance(), sm.Stance)
    assert_type(sm.set_session_stance("default", force_backend="eager"), sm.Stance)
    assert_type(sm.supported_stances(), tuple[str, ...])
    assert_type(sm.current_stance().backend_name, str | None)

    assert_type(sm.save_cache(path), sm.CacheInfo)
    assert_type(sm.load_cache("warm.smcache").artifacts, int)

    panel = sm.panel()
    assert_type(panel, StancePanel)
    assert_type(panel.session, sm.Stance)
    assert_type(panel.expanded, bool)

    spec = sm.MeasureSpec(stance=sm.Stance("force_eager"), memory=True)
    assert_type(spec.stance, sm.Stance | None)

    ranks = sm.history()[-1].ranks
    if isinstance(ranks, sm.RankReport):
        assert_type(ranks.flagged_ranks, list[int])
    try:
        sm.set_session_stance("no such stance")
    except sm.StanceError as err:
        assert_type(err, sm.StanceError)

    # mistakes a type checker catches
    sm.bundle(3)  # type: ignore[arg-type]
    sm.measure(ranks="every")  # type: ignore[arg-type]
    sm.Stnce()  # type: ignore[operator]  # not a name of the package: an object
