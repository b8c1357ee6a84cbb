"""helm-nemo: generated Helm charts and a Helm plugin for NeMo training on GKE and EKS."""

__version__ = "0.2.0"
