"""The control loop: observe the jobs, ask the policy, act on its Plan.

The controller drives one tick; acting carries out the spine's actions,
settling decides what became of a gang that ended, and progress folds what a
job reported into its row. Processes are reached only through ``workers``.
"""
