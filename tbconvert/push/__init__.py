"""Pushing a store into another tracker (``tbconvert push``), one adapter per tracker.

A layer of the read side: it reads the store (the views, series and params) and writes only
its own account of what was pushed (``push_runs``, ``push_marks``).  ``core`` is the
tracker-neutral push and its adapter interface; ``source`` reads the runs chosen; ``state``
keeps the marks; ``metrics`` batches points and moves marks only over what the tracker holds;
``steps`` picks one point per step for trackers whose steps only grow.  Per tracker, an
adapter: ``mlflow`` (with ``mlflow_remote``, MLflow's client and errors, ``keys``, its key
rule, and ``artifacts``, the non-scalar plugins as files) and ``wandb`` (with ``wandb_keys``,
its key rule, ``wandb_media``, images, texts and histograms as W&B objects, and
``wandb_offline``, its offline run directories read back).
"""
