"""Targets other than Kubernetes: the same values rendered for another scheduler (`--target`)."""

TARGETS = ("kubernetes", "slurm")
