"""Replication bootstrap custom resource: role, grants, CDC tables, publication."""
