"""Will it fit? The parallel layout and the GPU memory of a training release, checked from the values alone.

model (what the values say: the model, GPUs, parallel layout, each with its file:line), layout (Megatron's
start-up rules), memory (the per-GPU estimate of the worst pipeline stage), verdict (fits / tight / does not
fit, and what would change it), check (one release end to end: the `fit` report, and the problems validate
raises), gpu (the profile's GPU), recipes (NeMo 2 recipe defaults). docs/fit.md has the rules and formulas.
"""
