"""What a file's records say about it, checked and unpacked for the reader: the Meta record
(`meta`: spaces and columns, a hostile value refused), infos and custom data nested back like
their keys (`infos`), and where recordings and episodes came from (`provenance`, with the metadata
keys it shares with the recorders in `provenance_keys`).
"""
