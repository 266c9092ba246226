"""Failures raise tessera.Error carrying Tessera's message: the same text
the CLI prints after "error: " for the same arguments."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import assert_same, cli_error, cli_json, source  # noqa: E402

import tessera  # noqa: E402

A100 = source("configs/clusters/a100-dgx.toml")
MODEL = source("configs/models/megatron-18.4b.toml")


class ErrorTest(unittest.TestCase):
    def test_error_is_an_exception(self):
        self.assertTrue(issubclass(tessera.Error, Exception))
        self.assertIs(tessera.Error, tessera._tessera.Error)

    def test_missing_file(self):
        missing = source("configs/models/no-such-model.toml")
        with self.assertRaises(tessera.Error) as caught:
            tessera.plan.evaluate(model=missing, cluster=A100, dp=1, tp=1, pp=1, micro_batch=1)
        self.assertIn("no-such-model.toml", str(caught.exception))
        self.assertEqual(cli_error(["plan", "evaluate", "--model", missing, "--cluster", A100, "--dp", "1",
                                    "--tp", "1", "--pp", "1", "--micro-batch", "1"]), str(caught.exception))

    def test_bad_value(self):
        with self.assertRaises(tessera.Error) as caught:
            tessera.sim.collective(cluster=A100, engine="warp")
        self.assertIn("--engine 'warp'", str(caught.exception))
        self.assertEqual(cli_error(["sim", "collective", "--cluster", A100, "--engine", "warp"]),
                         str(caught.exception))

    def test_bad_plan_value(self):
        with self.assertRaises(tessera.Error) as caught:
            tessera.plan.evaluate(model=MODEL, cluster=A100, dp=8, tp=8, pp=1, micro_batch=1, recompute="sometimes")
        self.assertIn("sometimes", str(caught.exception))
        self.assertEqual(cli_error(["plan", "evaluate", "--model", MODEL, "--cluster", A100, "--dp", "8", "--tp",
                                    "8", "--pp", "1", "--micro-batch", "1", "--recompute", "sometimes"]),
                         str(caught.exception))

    def test_option_errors(self):
        # Unknown keyword, missing required option, a value that is not a number.
        with self.assertRaisesRegex(tessera.Error, "--bogus"):
            tessera.sim.collective(cluster=A100, bogus=1)
        with self.assertRaisesRegex(tessera.Error, "--dp"):
            tessera.plan.evaluate(model=MODEL, cluster=A100, tp=1, pp=1, micro_batch=1)
        with self.assertRaisesRegex(tessera.Error, "--devices"):
            tessera.plan.search(model=MODEL, cluster=A100, devices="many")

    def test_no_plan_fits(self):
        # As the CLI: the document (with the candidate counts) and a failure.
        model = source("configs/models/dense-10t.toml")
        args = ["plan", "search", "--model", model, "--cluster", A100, "--devices", "8"]
        with self.assertRaises(tessera.Error) as caught:
            tessera.plan.search(model=model, cluster=A100, devices=8)
        self.assertEqual(cli_error(args + ["--json"]), str(caught.exception))
        self.assertIn("no plan of", str(caught.exception))
        result = caught.exception.result
        self.assertEqual(result["plans"], [])
        assert_same(self, cli_json(args, check=False), result)

    def test_train_config_error(self):
        config = source("configs/train/default.toml")
        with self.assertRaises(tessera.Error) as caught:
            tessera.train.run(config, {"model.n_heads": 3, "parallel.dp": 1, "parallel.tp": 1, "parallel.pp": 1,
                                       "parallel.ep": 1})
        self.assertIn("n_heads", str(caught.exception))
        self.assertEqual(cli_error(["train", config, "--set", "model.n_heads=3", "--set", "parallel.dp=1", "--set",
                                    "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.ep=1"]),
                         str(caught.exception))

    def test_help_in_docstrings(self):
        self.assertIn("--micro-batch", tessera.plan.evaluate.__doc__)
        self.assertIn("--fail-uplink", tessera.sim.collective.__doc__)
        self.assertIn("--nproc", tessera.launch.__doc__)


if __name__ == "__main__":
    unittest.main()
