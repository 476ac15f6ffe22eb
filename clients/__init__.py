"""Helpers for the fleet's callers (the store's chat backend), installed with the project (``pip install .``).

They need boto3 and tenacity only: not the gateway, not the control plane.
"""
