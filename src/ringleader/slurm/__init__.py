"""Slurm: a real Slurm cluster on one machine for tests and demos (``lab``)."""
