"""Campaigns: a matrix of test settings, run seed by seed, summed per cell.

``spec``     the campaign file and its validation (one-line errors)
``plan``     cells, and the command that runs a cell's seeds
``execute``  running the units (here or as Spark tasks), the cell table, the page
"""
