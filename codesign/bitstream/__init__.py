"""Bitstreams: the .bit header, Vivado report parsers, the catalog, fetching into VTA's cache and
the HLS + Vivado build of a config."""
