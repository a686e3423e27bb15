"""Reading: `trajcore.open` -> `Dataset` (`dataset`), its `Episodes` (`episodes`), each an
`Episode` (`episode`), reading through the `DatasetReads` its dataset hands it (`reads`: the core's
reader, `core_reader`, and what is decoded once per dataset); damage (`integrity`: verify, recover).
Around that core, rooms named for what they read:

- `records/`: what a file's records say about it (`meta`, `infos`, `provenance`);
- `select/`: choosing episodes (`filters`, `metrics`, the command line's `--select` in `selection`);
- `multiagent/`: multi-agent recordings (`agents`, `env_episodes`, their `joint_plan`);
- `train/`: feeding a learner (`transitions`, `device`, `mix`).
"""
