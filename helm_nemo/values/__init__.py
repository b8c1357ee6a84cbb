"""Stage 2, a values or recipe file -> release plans: load with positions (load), ${VAR} substitution
(substitute), the chart's schema with file:line errors (validation), releases, charts and files (plan)."""
