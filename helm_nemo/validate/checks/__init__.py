"""Checks a schema cannot express, one module per topic: names, quantities, accelerators, containers."""
