"""The ``ringleader`` command line."""
