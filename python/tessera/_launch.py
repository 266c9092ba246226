"""tessera.launch: `tessera launch --nproc N ... -- CMD` from Python."""

import shlex
import sys

from tessera import _tessera
from tessera._options import to_args, with_help


def launch(command, nproc, check=True, **options):
    """Starts NPROC local ranks of COMMAND (a list of strings, or one string
    split as a shell would) with the torchrun-style job environment and
    waits for the job. Their output goes to this process's stdout/stderr,
    prefixed "[rank R]" unless no_prefix=True. Returns {"exit_code",
    "reason", "restarts", "attempts", "ranks": [...]}; with check=True (the
    default) a failed job raises tessera.Error (its `result` is that dict)."""
    if isinstance(command, str):
        command = shlex.split(command)
    args = ["--nproc", str(nproc)] + to_args(options) + ["--"] + [str(c) for c in command]
    sys.stdout.flush()
    sys.stderr.flush()
    return _tessera.launch(args, check)


with_help(launch, "launch", _tessera.help("launch"))
