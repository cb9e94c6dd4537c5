"""Volcano Locks reference service: the contract in openapi.yaml, served over HTTP."""
