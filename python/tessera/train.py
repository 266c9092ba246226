"""Training runs: `tessera train CONFIG --set k=v ...` in this process.

    summary = tessera.train.run("configs/train/default.toml",
                                {"train.steps": 5, "parallel.dp": 1}, plain=True)

On one process the single-process trainer runs; under `tessera launch`
(WORLD_SIZE > 1) or with a parallel layout every rank joins the job and
runs the parallel runtime, as `tessera train` does. Returns the run's
summary (runs/<name>/summary.json) as a dict.
"""

from tessera import _tessera
from tessera._options import to_args, with_help


def _override(key, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    return "{}={}".format(key, value)


def run(config_path, overrides=None, **options):
    """Trains from CONFIG (a TOML file) with overrides: a dict {"train.steps": 5}
    or a list of "key=value" strings (--set)."""
    if isinstance(overrides, dict):
        overrides = [_override(k, v) for k, v in overrides.items()]
    args = [str(config_path)] + to_args(options)
    for item in overrides or []:
        args += ["--set", str(item)]
    return _tessera.train_run(args)


with_help(run, "train", _tessera.help("train"))
