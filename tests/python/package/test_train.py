"""tessera.train.run trains the default model (one process) for a few steps
and returns the run's summary, the one it writes to summary.json, with the
losses `tessera train` gets for the same config and overrides."""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import assert_same, run_cli, source  # noqa: E402

import tessera  # noqa: E402

SINGLE = {"parallel.dp": 1, "parallel.tp": 1, "parallel.pp": 1, "parallel.ep": 1}


class TrainTest(unittest.TestCase):
    def test_tiny_run(self):
        config = source("configs/train/default.toml")
        with tempfile.TemporaryDirectory() as tmp:
            overrides = dict(SINGLE)
            overrides.update({"train.steps": 3, "eval.samples": 8, "train.out_dir": os.path.join(tmp, "py")})
            summary = tessera.train.run(config, overrides, plain=True)
            self.assertEqual(summary["steps"], 3)
            self.assertTrue(math.isfinite(summary["final_loss"]) and summary["final_loss"] > 0, summary)
            # The returned dict is the summary the run wrote.
            with open(os.path.join(tmp, "py", "default", "summary.json")) as f:
                assert_same(self, json.load(f), summary)
            # The CLI trains the same way (runs are reproducible: data order
            # from the seed and step, parameters from the model seed).
            overrides["train.out_dir"] = os.path.join(tmp, "cli")
            args = ["train", config, "--plain"]
            for key, value in overrides.items():
                args += ["--set", "{}={}".format(key, value)]
            run_cli(args)
            with open(os.path.join(tmp, "cli", "default", "summary.json")) as f:
                cli = json.load(f)
            for key in ("steps", "final_loss", "final_loss_avg10", "eval_loss", "eval_metric", "parameters",
                        "active_parameters"):
                self.assertEqual(cli[key], summary[key], key)

    def test_list_overrides(self):
        with tempfile.TemporaryDirectory() as tmp:
            overrides = ["{}={}".format(k, v) for k, v in SINGLE.items()]
            overrides += ["train.steps=2", "eval.samples=8", "train.out_dir=" + os.path.join(tmp, "runs")]
            summary = tessera.train.run(source("configs/train/default.toml"), overrides, plain=True)
            self.assertEqual(summary["steps"], 2)


if __name__ == "__main__":
    unittest.main()
