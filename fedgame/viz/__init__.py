"""The live dashboard behind ``fedgame dashboard``: a Mesa SolaraViz page (``viz`` extra).

``fedgame dashboard SCENARIO`` steps a live model (:mod:`fedgame.viz.live`) whose main knobs are
SolaraViz inputs (:mod:`fedgame.viz.knobs`); ``fedgame dashboard RUN_FOLDER`` replays a finished
run read-only (:mod:`fedgame.viz.replay`). Both offer the same data (:mod:`fedgame.viz.data`) to
the same views: the client network (:mod:`fedgame.viz.network`), the curves
(:mod:`fedgame.viz.curves`) and the current round's clients (:mod:`fedgame.viz.table`), put
together by :mod:`fedgame.viz.app` and served by :mod:`fedgame.viz.serve`. A market (a scenario
with ``servers:``) steps a live :mod:`fedgame.viz.market` model and shows the per-server views
of :mod:`fedgame.viz.market_views`, live or replayed.
"""
