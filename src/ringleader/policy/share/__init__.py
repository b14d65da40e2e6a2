"""The share stage: jobs the plan left waiting take turns on held GPUs.

Protocol in ``stage.py``; ``timeslice`` (Gandiva's time-slicing in quanta) and
``packing`` (two jobs on one GPU, kept only if it helps).
"""
