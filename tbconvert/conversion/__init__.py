"""The writer process: plan -> decode -> apply -> summarise.

``pipeline`` holds :func:`convert` (one pass) and :func:`watch` (passes until stopped).
``plan`` decides what each file needs (one planner for real and dry runs), ``workers``
decode (here or in ``--jobs`` processes), ``job`` applies chunks, one transaction each, in
commit groups (``commits``), and ``summary`` says what a pass did.  ``sources`` names a
logdir in the store; ``stopping`` turns SIGINT/SIGTERM into a stop after the current
transaction.
"""
