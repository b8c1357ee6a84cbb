"""`helm nemo report`: one self-contained HTML page of a run: its verdict, its curves, its pods' timeline, its recipe.

- series.py: every training step a log states (loss, validation loss, learning rate, step time, TFLOPS);
- model.py: what the page shows, as data (the stalls, the median and p95 step time, the timeline rows);
- gather.py: the reads (log files, or the cluster through `helm nemo status`'s reads) -> the model;
- charts.py: the curves as inline SVG (leather; docs/report.md compares the options);
- render.py + templates/report.html.j2: the page (no script, nothing fetched when it is opened).

Only this package imports leather: every other command starts as fast as before (tests/test_report.py measures it).
"""
