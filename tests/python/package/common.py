"""Shared by the package tests: the CLI binary, the source tree, and a strict
comparison of the package's dicts with the CLI's JSON."""

import json
import math
import os
import subprocess

TESSERA_BIN = os.environ["TESSERA_BIN"]
SOURCE_DIR = os.environ["TESSERA_SOURCE_DIR"]

# Keys whose values are wall-clock times of the computation itself: present
# in both, numbers, but not equal from one run to the next.
WALL_TIME_KEYS = {"search_wall_s", "sim_wall_s"}


def source(path):
    return os.path.join(SOURCE_DIR, path)


def run_cli(args, check=True):
    """Runs `tessera ARGS`; returns the CompletedProcess (text)."""
    result = subprocess.run([TESSERA_BIN] + args, capture_output=True, text=True, cwd=SOURCE_DIR)
    if check and result.returncode != 0:
        raise AssertionError("tessera {} failed ({}):\n{}".format(" ".join(args), result.returncode, result.stderr))
    return result


def cli_json(args, check=True):
    return json.loads(run_cli(args + ["--json"], check=check).stdout)


def cli_error(args):
    """The message of a failing CLI call: stderr without the "error: " prefix."""
    result = run_cli(args, check=False)
    assert result.returncode == 1, (result.returncode, result.stderr)
    text = result.stderr.strip()
    assert text.startswith("error: "), text
    return text[len("error: "):].replace("\n  ", "\n")


def assert_same(test, expected, actual, path="$"):
    """Equal documents, with equal JSON types (int stays int, bool stays
    bool), wall times excepted (both numbers)."""
    test.assertIs(type(actual), type(expected), "{}: {!r} vs {!r}".format(path, expected, actual))
    if isinstance(expected, dict):
        test.assertEqual(list(expected.keys()), list(actual.keys()), path)
        for key in expected:
            if key in WALL_TIME_KEYS:
                test.assertIsInstance(actual[key], float, path + "." + key)
                test.assertTrue(math.isfinite(actual[key]) and actual[key] >= 0, path + "." + key)
                continue
            assert_same(test, expected[key], actual[key], path + "." + key)
    elif isinstance(expected, list):
        test.assertEqual(len(expected), len(actual), path)
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(test, e, a, "{}[{}]".format(path, i))
    else:
        test.assertEqual(expected, actual, path)
