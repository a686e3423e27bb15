"""Reading: `trajcore.open` -> `Dataset` (`dataset`), its `Episodes` (`episodes`), each an
`Episode` (`episode`), reading through the `DatasetReads` its dataset hands it (`reads`: the core's
reader and what is decoded once per dataset); multi-agent env episodes (`env_episodes`, `agents`);
the training reads (`transitions`, `device`); what a file's records say (`meta`, `infos`);
choosing episodes (`filters`, `metrics`, `selection`); damage (`integrity`: verify, recover).
"""
