"""Getting data out of a store, built on :mod:`tbconvert.query`: files (``export``,
``image_export``), the hparams comparison (``hparams``), charts (``plot`` with matplotlib,
``svgchart`` for the report), the offline page (``report``) and datasette (``datasette``
metadata, ``serve``)."""
