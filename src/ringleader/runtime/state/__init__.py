"""What a server remembers: jobs, their events and users, in SQLite.

The store is the controller's memory across crashes and restarts; the job
spec is what a user submitted, validated before it is stored.
"""
