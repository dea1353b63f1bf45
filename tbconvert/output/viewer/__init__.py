"""The viewer (``tbconvert serve`` and ``tbconvert publish``): one page of plain HTML, CSS and
JavaScript (``static/``) that draws the store with plotly.js from the ``plotly`` wheel.

- :mod:`~tbconvert.output.viewer.data`: what the page asks for, as JSON-ready dicts: the runs
  table, a chart's lines (thinned on the store's side to min/max per bucket), groups.
- :mod:`~tbconvert.output.viewer.app`: the ASGI app of ``serve`` (Starlette), datasette
  mounted beside it on ``/datasette/``.
- :mod:`~tbconvert.output.viewer.publish`: the same page as static files.
"""
