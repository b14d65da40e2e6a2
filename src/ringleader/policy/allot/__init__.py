"""Allotment: policies that choose each job's GPU type and count together.

The published heterogeneity-aware schedulers (Gavel, Sia) solve one problem
over (job, GPU type, count) every round rather than ordering, sizing and
placing in turn. An ``Allot`` stage (``stage.py``) says what each job gets;
``Allotting`` (``deciding.py``) turns that into a ``Plan``, placing each job on
the fewest nodes of its type. ``max_min.py`` is Gavel's max-min fairness,
``sia.py`` Sia's integer programme.
"""
