"""Choosing episodes: the filters `Dataset.select` takes and applies to the index (`filters`),
bounds on episode metrics (`metrics`: pure logic), and the command line's ``--select KEY=VALUE``
parsed into those filters (`selection`). The index only: no observation is decompressed.
"""
