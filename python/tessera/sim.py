"""The simulator: `tessera sim collective|step` as functions returning dicts.

    tessera.sim.collective(cluster="configs/clusters/a100-dgx.toml", op="allreduce",
                           size="1G", engine="flow")
    tessera.sim.step(cluster="configs/clusters/a100-dgx.toml", plan="plan.toml", flows=True)

Each returns what `tessera sim ... --json` prints.
"""

from tessera import _tessera
from tessera._options import to_args, with_help


def collective(**options):
    """One collective on a simulated cluster (`tessera sim collective --json`)."""
    return _tessera.sim_collective(to_args(options))


def step(**options):
    """One training step of a plan file replayed (`tessera sim step --json`)."""
    return _tessera.sim_step(to_args(options))


with_help(collective, "sim collective", _tessera.help("sim collective"))
with_help(step, "sim step", _tessera.help("sim step"))
