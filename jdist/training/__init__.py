"""The global-view training step and its state.

`step_core` is the one train/eval step every way of training builds on (masked loss, real-example count,
accumulation, mixed precision, weight-update sharding); `steps` turns a user's `loss_fn` into it
(`make_train_step`, `make_eval_step`); `accumulation` splits a batch into micro-batches; `train_state` holds
parameters, optimizer state and step; `gradient_capture` runs a step whose parameters live elsewhere.
"""
