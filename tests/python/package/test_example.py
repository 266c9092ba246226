"""examples/planner_sweep.py runs and writes its PNG (matplotlib, Agg)."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SOURCE_DIR, source  # noqa: E402


class ExampleTest(unittest.TestCase):
    def test_planner_sweep(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sweep.png")
            result = subprocess.run([sys.executable, source("examples/planner_sweep.py"), out], cwd=SOURCE_DIR,
                                    capture_output=True, text=True, timeout=500)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("cards: dp", result.stdout)
            with open(out, "rb") as f:
                data = f.read()
            self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"), data[:8])
            self.assertGreater(len(data), 10000)


if __name__ == "__main__":
    unittest.main()
