"""The place stage's speed machinery: private to ``place``.

``free`` indexes a cluster's free GPUs for best fit; ``keeping`` keeps each running
job's GPUs from one decision to the next, redone only for the jobs that changed.
Same placements as afresh (``tests/test_keeping.py``, ``tests/test_free.py``).
"""
