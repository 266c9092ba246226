"""Keyword arguments to the CLI's option strings.

The C++ side parses them with the CLI's own option table
(tools/tessera/options/query_options.h), so the package takes the same
options, with the same defaults, checks and error messages, as the CLI:

  name=value        --name value      (underscores become dashes)
  name=True         --name            (a flag; False or None: left out)
  name=[a, b]       --name a --name b (a repeatable option)

Numbers are written so that they read back exactly (repr of a float).
"""

import os


def _text(value):
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def to_args(options):
    """The CLI arguments for a dict of keyword options."""
    args = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += [flag, _text(item)]
        else:
            args += [flag, _text(value)]
    return args


def with_help(function, command, help_text):
    """Appends the command's options (the CLI's help) to a docstring."""
    function.__doc__ = (function.__doc__ or "") + "\nOptions of `tessera " + command + "` (as keywords):\n\n" + help_text
    return function
