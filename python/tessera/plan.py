"""The planner: `tessera plan evaluate|search` as functions returning dicts.

    tessera.plan.evaluate(model="configs/models/megatron-145.6b.toml",
                          cluster="configs/clusters/a100-dgx.toml",
                          dp=24, tp=8, pp=8, vpp=2, micro_batch=2, recompute="full")
    tessera.plan.search(model=..., cluster=..., devices=8192, tokens=1e13, top=5)

Each returns what `tessera plan ... --json` prints. search raises
tessera.Error when no plan fits (its `result` holds the document, with the
candidate counts), as the CLI exits with 1.
"""

from tessera import _tessera
from tessera._options import to_args, with_help


def evaluate(**options):
    """Step time, throughput, MFU and memory of one plan (`tessera plan evaluate --json`)."""
    return _tessera.plan_evaluate(to_args(options))


def search(**options):
    """The fastest plans that fit in memory (`tessera plan search --json`)."""
    return _tessera.plan_search(to_args(options))


with_help(evaluate, "plan evaluate", _tessera.help("plan evaluate"))
with_help(search, "plan search", _tessera.help("plan search"))
