"""Tools over whole datasets, behind the command line and the functions of the same names:
`convert` (rewrite with other codecs), `to_store` (a dataset written locally, then uploaded whole),
`output` (where an export or a page is written), `bench` (the recording overhead on an env:
``trajcore bench``).
"""
