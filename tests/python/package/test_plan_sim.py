"""tessera.plan and tessera.sim return the CLI's --json documents for the
same arguments (keyword options turned into the CLI's)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import assert_same, cli_json, source  # noqa: E402

import tessera  # noqa: E402

A100 = source("configs/clusters/a100-dgx.toml")
UBL = source("configs/clusters/ascend950-ubl128.toml")
THIS_MACHINE = source("configs/clusters/this-machine.toml")

PLAN_TOML = """[model]
layers = 48
hidden = 8192
seq = 2048
vocab = 51200
[parallel]
dp = 16
tp = 8
pp = 2
micro_batch = 1
global_batch = 256
schedule = "1f1b"
precision = "bf16"
"""


class PlanTest(unittest.TestCase):
    def check(self, cli_args, document):
        assert_same(self, cli_json(cli_args), document)

    def test_evaluate_flags_and_defaults(self):
        model = source("configs/models/megatron-145.6b.toml")
        document = tessera.plan.evaluate(model=model, cluster=A100, dp=24, tp=8, pp=8, vpp=2, micro_batch=2,
                                         recompute="full", no_sp=True, no_flash=True, no_overlap=True)
        self.assertEqual(document["plan"]["vpp"], 2)
        self.assertGreater(document["step_time_s"], 0)
        self.check(["plan", "evaluate", "--model", model, "--cluster", A100, "--dp", "24", "--tp", "8", "--pp", "8",
                    "--vpp", "2", "--micro-batch", "2", "--recompute", "full", "--no-sp", "--no-flash",
                    "--no-overlap"], document)

    def test_evaluate_with_run_cost(self):
        model = source("configs/models/megatron-1008b.toml")
        document = tessera.plan.evaluate(model=model, cluster=A100, dp=6, tp=8, pp=64, micro_batch=1,
                                         global_batch=3072, recompute="full", tokens=4.5e11, restart_s=300.5)
        self.assertIn("cost", document)
        self.check(["plan", "evaluate", "--model", model, "--cluster", A100, "--dp", "6", "--tp", "8", "--pp", "64",
                    "--micro-batch", "1", "--global-batch", "3072", "--recompute", "full", "--tokens", "4.5e11",
                    "--restart-s", "300.5"], document)

    def test_evaluate_on_the_calibrated_twin(self):
        model = source("configs/models/tessera-default.toml")
        args = dict(model=model, cluster=THIS_MACHINE, dp=1, tp=1, pp=1, micro_batch=4, precision="fp32")
        document = tessera.plan.evaluate(**args)
        self.assertTrue(document["time_model"].startswith("twin "), document["time_model"])
        self.check(["plan", "evaluate", "--model", model, "--cluster", THIS_MACHINE, "--dp", "1", "--tp", "1",
                    "--pp", "1", "--micro-batch", "4", "--precision", "fp32"], document)
        roofline = tessera.plan.evaluate(no_twin=True, **args)
        self.assertEqual(roofline["time_model"], "roofline")

    def test_search(self):
        model = source("configs/models/megatron-18.4b.toml")
        document = tessera.plan.search(model=model, cluster=A100, devices=256, top=3, tokens=1e11, no_fp8=True)
        self.assertEqual(len(document["plans"]), 3)
        self.check(["plan", "search", "--model", model, "--cluster", A100, "--devices", "256", "--top", "3",
                    "--tokens", "1e11", "--no-fp8"], document)


class SimTest(unittest.TestCase):
    def check(self, cli_args, document):
        assert_same(self, cli_json(cli_args), document)

    def test_collective_engines(self):
        for engine in ("flow", "analytic"):
            with self.subTest(engine=engine):
                document = tessera.sim.collective(cluster=A100, op="allgather", size="64M", engine=engine, ranks=16)
                self.assertEqual(document["engine"], engine)
                self.assertEqual(document["size_bytes"], 64 << 20)
                self.check(["sim", "collective", "--cluster", A100, "--op", "allgather", "--size", "64M",
                            "--engine", engine, "--ranks", "16"], document)

    def test_collective_packet_engine(self):
        document = tessera.sim.collective(cluster=A100, size=1 << 20, engine="packet", ranks=8, pfc=True, cc="none")
        self.assertIn("cnps", document)
        self.check(["sim", "collective", "--cluster", A100, "--size", str(1 << 20), "--engine", "packet",
                    "--ranks", "8", "--pfc", "--cc", "none"], document)

    def test_collective_repeated_option(self):
        uplinks = ["0:0:0", "0:1:0"]
        document = tessera.sim.collective(cluster=UBL, size="16M", routing="ecmp", fail_uplink=uplinks)
        healthy = tessera.sim.collective(cluster=UBL, size="16M", routing="ecmp")
        self.assertGreaterEqual(document["time_s"], healthy["time_s"])
        self.check(["sim", "collective", "--cluster", UBL, "--size", "16M", "--routing", "ecmp",
                    "--fail-uplink", uplinks[0], "--fail-uplink", uplinks[1]], document)

    def test_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            plan = os.path.join(tmp, "plan.toml")
            with open(plan, "w") as f:
                f.write(PLAN_TOML)
            trace = os.path.join(tmp, "trace.json")
            document = tessera.sim.step(cluster=A100, plan=plan, trace=trace)
            self.assertIn("planner_closed_form_s", document)
            self.assertGreater(os.path.getsize(trace), 0)
            self.check(["sim", "step", "--cluster", A100, "--plan", plan], document)
            flows = tessera.sim.step(cluster=A100, plan=plan, flows=True, routing="ecmp")
            self.assertIn("flow_replay", flows)
            self.check(["sim", "step", "--cluster", A100, "--plan", plan, "--flows", "--routing", "ecmp"], flows)


if __name__ == "__main__":
    unittest.main()
