"""Tessera from Python.

Submodules:
  tessera.torch   registers the "tessera" backend of torch.distributed
  tessera.plan    the planner (evaluate, search)
  tessera.sim     the simulator (collective, step)
  tessera.train   training runs
"""
