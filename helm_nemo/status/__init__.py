"""`helm nemo status` and `helm nemo logs` on Kubernetes: is the run healthy, how far is it, how fast, when
will it end, and if it failed, why.

Pure functions over what the API server returns, so each part is tested on object dicts and log text:

- workloads.py: JobSet / Job conditions and counts; events.py: warning events; pods.py: pods by phase and each unhealthy
  pod's reason in words; conditions.py: API times and conditions; kueue.py: the Kueue Workload (admitted, pending on quota or on topology);
- progress.py: training progress from the tail of the rank-0 log (the parsers of `helm nemo metrics`,
  so the figures are the same): step, max steps, step time, TFLOPS/GPU, MFU, tokens/s, ETA, stall;
- the first cause of a failure: helm_nemo.diagnose over the logs read and the pods' states;
- verdict.py: one line per release and the exit code; render.py: text, --watch, JSON;
- cluster.py: the reads (one list per object kind per refresh; the log's tail, never the whole log).

docs/status.md documents every state, reason and signature.
"""
