"""Unit tests of a resumed stage's logs (cogr_trl.py StepLog, make_reward_func): the records
written after the checkpoint a stage resumes from are dropped (those steps run again), the
earlier ones are kept, and the reward calls number on from the checkpoint's step.

Run: python -m unittest -v trainers/trl/test_resume_logs.py (in the trainer venv)."""

from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cogr_trl  # noqa: E402


def lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()]


class ResumedLogs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_step_log_keeps_the_steps_up_to_the_checkpoint(self):
        log = self.root / "grpo.log.jsonl"
        # steps 1..12 logged, the last line cut by the kill
        log.write_text("".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in range(1, 13)) + '{"step": 13, "rew')
        cogr_trl.StepLog(log, 20, "grpo test", start=10)
        self.assertEqual([r["step"] for r in lines(log)], list(range(1, 11)))
        # a fresh stage starts an empty log
        cogr_trl.StepLog(log, 20, "grpo test", start=0)
        self.assertEqual(log.read_text(), "")

    def test_reward_log_keeps_the_calls_up_to_the_checkpoint_and_numbers_on(self):
        log = self.root / "rewards.jsonl"
        recs = [{"call": c, "label": f"query:{c}", "completion": "{}", "reward": 0.1 * c} for c in range(1, 8) for _ in range(2)]
        log.write_text("".join(json.dumps(r) + "\n" for r in recs))
        posted = []

        def fake_post(url, body, token, timeout):
            posted.append(body)
            return {"rewards": [0.5] * len(body["query"])}

        real = cogr_trl.post_json
        cogr_trl.post_json = fake_post
        try:
            f = cogr_trl.make_reward_func("http://127.0.0.1:1/get_reward", None, 5, log, resume_after=5)
            kept = lines(log)
            self.assertEqual(sorted({r["call"] for r in kept}), [1, 2, 3, 4, 5])
            self.assertEqual(len(kept), 10)
            out = f(prompts=["p", "p"], completions=['{"keywords": ["a"]}', '{"keywords": ["b"]}'], label=["query:x", "query:x"])
            self.assertEqual(out, [0.5, 0.5])
            after = lines(log)
            self.assertEqual([r["call"] for r in after[10:]], [6, 6])
            self.assertEqual(len(posted), 1)
            # not resumed: the log starts empty and the calls at 1
            g = cogr_trl.make_reward_func("http://127.0.0.1:1/get_reward", None, 5, log)
            self.assertEqual(log.read_text(), "")
            g(prompts=["p"], completions=['{"keywords": ["a"]}'], label=["query:x"])
            self.assertEqual([r["call"] for r in lines(log)], [1])
        finally:
            cogr_trl.post_json = real


if __name__ == "__main__":
    unittest.main()
