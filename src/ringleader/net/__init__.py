"""TensorLights on real hosts: ``tc`` priority for parameter-server traffic.

``agent`` turns per-job priorities into htb classes and u32 filters on a
host's egress interface; ``netlab`` proves it in network namespaces it builds
and tears down itself; ``emulator`` is the synchronous PS/worker traffic
pattern it measures.
"""
