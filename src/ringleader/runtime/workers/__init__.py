"""Workers: the processes a job runs as, and the machinery that starts and ends them.

Executors (local, Ray) behind one interface, the small ``launch`` parent of
every worker, warm starts, the uid a job runs as, and process identity that
survives a restart. Nothing here knows about the store, nor of the policy
more than its view of a cluster (``policy.views``).
"""
