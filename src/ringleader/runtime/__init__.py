"""The runtime: the policy core's plans carried out on real processes.

A controller (asyncio) keeps job state in SQLite, asks the same
``Policy.decide`` the simulator uses, diffs the Plan against what runs, and
acts through an executor (``local`` today). A REST API and the CLI sit on top.

By concern, each folder importing only those below it:

* ``http/``: the REST API's routers, the dashboard, who may call them;
* ``control/``: the loop that observes, decides and acts, and settles gangs;
* ``state/``: the store (schema, file guard, queries, rows), specs, users;
* ``workers/``: executors, the worker's launch wrapper, warm starts, uids.

``server`` puts them together into ``ringleader server``.
"""
