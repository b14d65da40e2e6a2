"""What a policy decides from and what it returns: the model every stage shares.

``views`` (the snapshot: jobs, devices, the cluster), ``plan`` (the desired state
of every job, and why each has its size), ``needs`` (what a policy asks of the
body that runs it), ``objective`` (a job with the speed model to trust for it,
and its predicted remaining time) and ``arrival`` (submission order). Imports
only ``ringleader.perf``; knows nothing of any stage's caches (``JobView.memo``
is opaque here).
"""
