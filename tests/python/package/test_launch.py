"""tessera.launch starts local ranks with the job environment: 2 Python
ranks that report it; a failing rank (tessera.Error, or the exit code with
check=False); and 2 ranks training the default model data-parallel through
tessera.train.run, matching a single-process run of the same steps."""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import source  # noqa: E402

import tessera  # noqa: E402

PYTHON = sys.executable

REPORT = """
import json, os, sys
import tessera
env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                      "OMP_WAIT_POLICY")}
with open(os.path.join(sys.argv[1], "rank%s.json" % env["RANK"]), "w") as f:
    json.dump(env, f)
"""

TRAIN = """
import json, os, sys
import tessera
out = sys.argv[1]
summary = tessera.train.run(sys.argv[2], json.loads(sys.argv[3]), plain=True)
with open(os.path.join(out, "summary%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(summary, f)
"""


class LaunchTest(unittest.TestCase):
    def test_two_ranks_get_the_job_environment(self):
        # Not set for the ranks: `import tessera` in a rank chooses passive waits.
        policy = os.environ.pop("OMP_WAIT_POLICY", None)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                self.run_reporters(tmp)
        finally:
            if policy is not None:
                os.environ["OMP_WAIT_POLICY"] = policy

    def run_reporters(self, tmp):
        result = tessera.launch([PYTHON, "-c", REPORT, tmp], nproc=2, timeout=120)
        self.assertEqual(result["exit_code"], 0, result)
        self.assertEqual(sorted(r["rank"] for r in result["ranks"]), [0, 1])
        self.assertTrue(all(r["exited"] and r["exit_code"] == 0 for r in result["ranks"]), result)
        for rank in (0, 1):
            with open(os.path.join(tmp, "rank%d.json" % rank)) as f:
                env = json.load(f)
            self.assertEqual(env["RANK"], str(rank))
            self.assertEqual(env["WORLD_SIZE"], "2")
            self.assertEqual(env["LOCAL_RANK"], str(rank))
            self.assertTrue(env["MASTER_ADDR"] and env["MASTER_PORT"], env)
            self.assertEqual(env["OMP_WAIT_POLICY"], "passive")

    def test_failing_rank(self):
        fail = "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"
        with self.assertRaises(tessera.Error) as caught:
            tessera.launch([PYTHON, "-c", fail], nproc=2, timeout=120, grace=1)
        self.assertIn("exit code 3", str(caught.exception))
        self.assertEqual(caught.exception.result["exit_code"], 3)
        result = tessera.launch([PYTHON, "-c", fail], nproc=2, check=False, timeout=120, grace=1)
        self.assertEqual(result["exit_code"], 3)
        self.assertIn("rank 1", result["reason"])

    def test_bad_options(self):
        with self.assertRaisesRegex(tessera.Error, "--nnodes 'x'"):
            tessera.launch([PYTHON, "-c", "pass"], nproc=2, nnodes="x")
        with self.assertRaisesRegex(tessera.Error, "--nproc"):
            tessera.launch([PYTHON, "-c", "pass"], nproc=0)

    def test_two_ranks_train_like_one(self):
        config = source("configs/train/default.toml")
        with tempfile.TemporaryDirectory() as tmp:
            common = {"train.steps": 3, "eval.samples": 8, "parallel.tp": 1, "parallel.pp": 1, "parallel.ep": 1}
            two = dict(common, **{"parallel.dp": 2, "train.out_dir": os.path.join(tmp, "two")})
            result = tessera.launch([PYTHON, "-c", TRAIN, tmp, config, json.dumps(two)], nproc=2, timeout=300)
            self.assertEqual(result["exit_code"], 0, result)
            one = dict(common, **{"parallel.dp": 1, "train.out_dir": os.path.join(tmp, "one")})
            single = tessera.train.run(config, one, plain=True)
            with open(os.path.join(tmp, "summary0.json")) as f:
                rank0 = json.load(f)
            self.assertEqual(rank0["steps"], 3)
            self.assertTrue(math.isfinite(rank0["final_loss"]))
            # Data parallelism does not change the math (configs/train/default.toml).
            self.assertAlmostEqual(rank0["final_loss"], single["final_loss"], delta=1e-4 * abs(single["final_loss"]))


if __name__ == "__main__":
    unittest.main()
