"""Rendered manifests compared as data: normalisation and a semantic, object-by-object diff (semantic)."""
