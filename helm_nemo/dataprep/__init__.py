"""The data-preparation stage (seeds 002 and 004): which shards exist, which worker takes which, and where
the tokenized outputs land. The chart (generator/data-prep), the Slurm array job and the recipe's wait all
follow the rules in `shards.py`; the worker script is generator/data-prep/files/prepare.sh.
"""
