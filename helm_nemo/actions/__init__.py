"""Stage 4, what the user asked for, with the real helm: the helm runner (helm), template/install/upgrade/
uninstall of release plans (releases), render + offline validation (lint), OCI publishing (publish)."""
