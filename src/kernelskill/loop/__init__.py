"""The closed loop (the published Algorithm 1): seeds → best seed is the base → each round repairs the latest
failing kernel or optimizes the base → review → update the short-term memory → promote.

    runner = TaskRunner(task, store, team, settings)   # one task; resumable from the run store
    outcome = runner.run()

Modules: settings (LoopSettings), state (the loop's state, its JSON snapshot and the promotion rule), feedback
(review results and decisions as the agents see them), runner (the loop), optimize (the `optimize` command's
orchestration: run folder, store, client, summary), display (live progress).
"""
