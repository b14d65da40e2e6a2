"""The runtime: the policy core's plans carried out on real processes.

A controller (asyncio) keeps job state in SQLite, asks the same
``Policy.decide`` the simulator uses, diffs the Plan against what runs, and
acts through an executor (``local`` today). A REST API and the CLI sit on top.
"""
