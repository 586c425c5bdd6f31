"""The closed loop (the published Algorithm 1): seeds → best seed is the base → each round repairs the latest
failing kernel or optimizes the base → review → update the short-term memory → promote.

    ctx = task_context(store, run_id, task_id, problem, client, budget, kb, review, settings, evaluator, on_event,
                       profiles=wants_profiles(settings, evaluator))
    state = TaskRunner(ctx).run()        # one task; resumable from the run store
    outcome = summarize(store, task_id, state)

Modules: settings (LoopSettings), state (the loop's state, its JSON snapshot and the promotion rule), feedback
(review results and decisions as the agents see them), evaluator (where each review and profile runs, and what
comes back), context (what a task runs against), runner (the loop), optimize (the `optimize` command's
orchestration: run folder, store, client, summary), display (live progress), outcome (a task's history lines and
what it came to, which the store persists and the report reads).
"""
