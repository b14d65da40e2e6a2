"""The profile stage: where a job's speed model comes from before it is sized.

Protocol in ``stage.py``; ``sources`` has ``Precompute`` (known on arrival),
``Exploratory`` (probe at 1/2/4/8 GPUs) and ``Online`` (fit from what the job
reports). ``_incremental`` keeps each candidate on the view it was made from.
"""
