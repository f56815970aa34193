"""Analyses over layers and hardware configs (roofline bounds)."""
