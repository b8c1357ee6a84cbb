"""Stage 1, profiles + schemas + Jinja2 sources -> charts/: accelerator profiles (profiles), schema bundling
(schema_bundle), chart rendering and drift check (charts), versions and the lock (versions), values docs."""
