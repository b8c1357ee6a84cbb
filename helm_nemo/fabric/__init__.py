"""The fabric check: read an nccl-tests output (`nccl_log`) and judge it against the profile's floors (`judge`)."""
