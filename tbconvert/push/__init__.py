"""Pushing a store into another tracker (``tbconvert push``): MLflow for now.

A layer of the read side: it reads the store (the views, series and params) and writes only
its own account of what was pushed (``push_runs``, ``push_marks``).  ``keys`` names series and
params in the tracker; ``source`` reads the runs chosen; ``state`` keeps the marks;
``metrics`` batches points and moves marks only over what the tracker holds;
``mlflow_remote`` is MLflow's client and errors; ``mlflow`` the push itself; ``artifacts``
the non-scalar plugins as files.
"""
