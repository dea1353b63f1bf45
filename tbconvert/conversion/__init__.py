"""The writer process: plan -> decode -> apply -> summarise.

``pipeline`` holds :func:`convert` (one pass) and :func:`watch` (passes until stopped).
``plan`` decides what each file needs (one planner for real and dry runs), ``workers``
decode (here or in ``--jobs`` processes), ``job`` commits the chunks in commit groups
(``commits``), one transaction each, each chunk applied by ``applying``, and ``summary``
says what a pass did.  ``sources`` names a logdir in the store and holds the queries its
rules ask; ``stopping`` turns SIGINT/SIGTERM into a stop after the current transaction.
"""
